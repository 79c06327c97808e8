# Shared by the shell tests (test/release/run.sh, test/watch/run_tty.sh, test/elixir/run.sh):
# messages, failing with the remote shell's pane, waiting on a tmux pane, installing a
# Debian package, copying the working tree. Source it after setting:
#   test_name   the prefix of every message (test-release, ...)
#   tmux_sock   (tests with a pane) the tmux server's socket name, private to the run
#   tmux_target (tests with a pane) the pane's session name
# shellcheck shell=bash

say() { printf '%s: %s\n' "$test_name" "$*"; }

# The pane's text, wrapped lines joined.
pane() { tmux -L "$tmux_sock" capture-pane -p -J -S -500 -t "$tmux_target"; }

fail() {
    printf '%s: FAILED: %s\n' "$test_name" "$*" >&2
    if [ -n "${tmux_sock:-}" ] && tmux -L "$tmux_sock" has-session 2>/dev/null; then
        echo "--- remote shell pane:" >&2
        pane >&2 || true
    fi
    exit 1
}

# type_line TEXT: types TEXT into the pane, then Enter.
type_line() { tmux -L "$tmux_sock" send-keys -t "$tmux_target" -l "$1"; tmux -L "$tmux_sock" send-keys -t "$tmux_target" Enter; }

# wait_for REGEX SECONDS WHAT: until the pane shows REGEX (extended grep). It waits three
# times the stated seconds: a loaded CI machine is slow, and success returns at once.
wait_for() {
    local deadline=$((SECONDS + 3 * $2))
    while ((SECONDS < deadline)); do
        pane | grep -Eq -- "$1" && return 0
        sleep 0.2
    done
    fail "$3: '$1' did not appear within $((3 * $2)) s"
}

# need COMMAND PACKAGE: installs Debian's PACKAGE when COMMAND is missing.
need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    say "installing Debian's $2"
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1 \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; } \
        || fail "$1 is missing and $2 could not be installed"
}

# copy_tree REPO DEST: the working tree as git sees it (tracked and untracked, not ignored),
# symlinks kept.
copy_tree() {
    mkdir -p "$2"
    (cd "$1" && git ls-files -co --exclude-standard -z \
         | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$2"
}
