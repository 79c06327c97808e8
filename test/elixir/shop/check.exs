# Run by test/elixir/run.sh as `mix run check.exs`: traces Shop.Cart.checkout/1 with
# keyword options and checks the counts through :ferrotrace.summary/1.
calls = 1000
{:ok, s} = :ferrotrace.calls({Shop.Cart, :checkout, :_}, duration: 2000)
for i <- 1..calls, do: Shop.Cart.checkout([i, 1])

# The collector drains every millisecond: wait (at most 5 s) until every return is in.
summary =
  Enum.reduce_while(1..100, nil, fn _, _ ->
    summary = :ferrotrace.summary(s)
    case summary.calls do
      [%{returns: ^calls}] -> {:halt, summary}
      _ -> Process.sleep(50); {:cont, summary}
    end
  end)

IO.puts(:ferrotrace.format(s))

case summary.calls do
  [%{mfa: {Shop.Cart, :checkout, 1}, count: ^calls, returns: ^calls, exceptions: 0}] ->
    :ok
  other ->
    raise "expected #{calls} calls of Shop.Cart.checkout/1, got: #{inspect(other)}"
end

:ok = :ferrotrace.stop(s)
false = match?(%{status: :running}, :ferrotrace.summary(s))
{:traced, false} = :erlang.trace_info({Shop.Cart, :checkout, 1}, :traced)
:ok = :ferrotrace.release(s)
IO.puts("test-elixir: #{calls} calls of Shop.Cart.checkout/1 counted; keyword options accepted")
