%%% @doc Functions traced by ferrotrace_args_SUITE: latency and result set by the arguments.
-module(ft_args_target).

-export([work/2, fail/1, take/1]).

%% @doc Sleeps `Ms' milliseconds and returns `{done, Ms, Tag}'.
-spec work(non_neg_integer(), term()) -> {done, non_neg_integer(), term()}.
work(Ms, Tag) ->
    timer:sleep(Ms),
    {done, Ms, Tag}.

%% @doc Sleeps `Ms' milliseconds, then raises `error:{args_fail, Ms}'.
-spec fail(non_neg_integer()) -> no_return().
fail(Ms) ->
    timer:sleep(Ms),
    erlang:error({args_fail, Ms}).

%% @doc Returns its argument's size class: takes terms of any size.
-spec take(term()) -> ok.
take(_Term) -> ok.
