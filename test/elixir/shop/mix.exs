# A mix project that uses ferrotrace as the README says; test/elixir/run.sh builds it with a
# copy of ferrotrace's working tree as a path dependency (FERROTRACE_PATH).
defmodule Shop.MixProject do
  use Mix.Project

  def project do
    [
      app: :shop,
      version: "0.1.0",
      elixir: "~> 1.14",
      deps: [{:ferrotrace, path: System.get_env("FERROTRACE_PATH", "../ferrotrace"), manager: :rebar3}]
    ]
  end

  def application, do: [extra_applications: [:logger]]
end
