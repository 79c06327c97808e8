-module(relapp_sup).
-behaviour(supervisor).
-export([start_link/0, init/1]).

start_link() -> supervisor:start_link({local, ?MODULE}, ?MODULE, []).

init([]) ->
    Worker = #{id => relapp_work, start => {relapp_work, start_link, []}},
    {ok, {#{strategy => one_for_one}, [Worker]}}.
