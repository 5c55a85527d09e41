#!/usr/bin/env bash
# brokered-shell: put the brokered command dispatcher first on PATH.
#
#   source shims/brokered-env.sh        # in bash or zsh: export the variables below
#   eval "$(shims/brokered-env.sh)"     # from any POSIX shell: the same
#   shims/brokered-env.sh               # just print the export lines
#
# Exports:
#   BROKERED_SHELL_BIN_DIR   shims/brokered-bin (the dispatcher and its command files),
#                            moved to the front of PATH (once, however often this runs)
#   BROKERED_SHELL_TOYBOX    the toybox binary; kept when already set, else `toybox`
#                            from PATH as an absolute path (plain `toybox` if none)
#   BROKERED_SHELL_REQUEST   the brokered-request client; kept when already set, else this
#                            package's build/Release, build/Debug or prebuilds/linux-<arch>
# The broker itself is found through BROKERED_SHELL_SOCKET and the session variables,
# which the process that starts the shell sets; this script does not touch them.

__bsh_env_main() {
  local source_file dir
  if [ -n "${BASH_VERSION:-}" ]; then
    source_file=${BASH_SOURCE[0]}
  elif [ -n "${ZSH_VERSION:-}" ]; then
    eval 'source_file=${(%):-%x}'
  else
    source_file=$0
  fi
  case $source_file in
    */*) dir=${source_file%/*} ;;
    *) dir=. ;;
  esac
  dir=$(cd "$dir" && pwd -P) || return 1
  local bin_dir="$dir/brokered-bin"
  [ -x "$bin_dir/brokered-dispatch" ] || return 1

  # PATH with every earlier copy of the bin dir removed, then the bin dir in front.
  local path_rest="${PATH:-}:" entry new_path=
  while [ -n "$path_rest" ]; do
    entry=${path_rest%%:*}
    path_rest=${path_rest#*:}
    if [ "$entry" = "$bin_dir" ] || { [ -n "$entry" ] && [ "$entry" -ef "$bin_dir" ]; }; then
      continue
    fi
    new_path="$new_path${new_path:+:}$entry"
  done

  local toybox=${BROKERED_SHELL_TOYBOX:-}
  if [ -z "$toybox" ]; then
    toybox=$(PATH=$new_path command -v toybox 2>/dev/null) || toybox=
    case $toybox in
      /*) ;;
      *) toybox=toybox ;;
    esac
  fi

  local request=${BROKERED_SHELL_REQUEST:-}
  if [ -z "$request" ]; then
    # Where src/native/loader.ts looks: a build made here, else the package's prebuild.
    local root=${dir%/*} arch build
    arch=$(uname -m 2>/dev/null)
    case $arch in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; esac
    request="$root/build/Release/brokered-request"
    for build in build/Release build/Debug "prebuilds/linux-$arch"; do
      if [ -x "$root/$build/brokered-request" ]; then
        request="$root/$build/brokered-request"
        break
      fi
    done
  fi

  __bsh_env_bin_dir=$bin_dir
  __bsh_env_path="$bin_dir${new_path:+:$new_path}"
  __bsh_env_toybox=$toybox
  __bsh_env_request=$request
}

__bsh_env_quote() {
  # Single-quoted for any POSIX shell: ' becomes '\''.
  printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

if __bsh_env_main; then
  if (return 0 2>/dev/null); then
    export BROKERED_SHELL_BIN_DIR="$__bsh_env_bin_dir"
    export PATH="$__bsh_env_path"
    export BROKERED_SHELL_TOYBOX="$__bsh_env_toybox"
    export BROKERED_SHELL_REQUEST="$__bsh_env_request"
  else
    printf 'export BROKERED_SHELL_BIN_DIR=%s\n' "$(__bsh_env_quote "$__bsh_env_bin_dir")"
    printf 'export PATH=%s\n' "$(__bsh_env_quote "$__bsh_env_path")"
    printf 'export BROKERED_SHELL_TOYBOX=%s\n' "$(__bsh_env_quote "$__bsh_env_toybox")"
    printf 'export BROKERED_SHELL_REQUEST=%s\n' "$(__bsh_env_quote "$__bsh_env_request")"
  fi
else
  printf 'brokered-shell: cannot find shims/brokered-bin next to brokered-env.sh\n' >&2
fi
unset -f __bsh_env_main __bsh_env_quote
unset __bsh_env_bin_dir __bsh_env_path __bsh_env_toybox __bsh_env_request
