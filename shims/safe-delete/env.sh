#!/usr/bin/env bash
# brokered-shell safe-delete: the variables that switch the shims on.
#
#   source shims/safe-delete/env.sh      # export them into this bash/zsh
#   eval "$(shims/safe-delete/env.sh)"   # the same from any POSIX shell
#   shims/safe-delete/env.sh             # just print the export lines
#
# Sets BROKERED_SHELL_SAFE_DELETE_CLIENT, adds a --require to NODE_OPTIONS and a
# directory to PYTHONPATH (each once), and points BASH_ENV at safe-delete.sh (a BASH_ENV
# already set elsewhere is kept in BROKERED_SHELL_SAFE_DELETE_NEXT_BASH_ENV and still
# sourced). The broker itself is found through BROKERED_SHELL_SOCKET and the session
# variables, which `brokered-shell run` sets; this script does not touch them.
# Do not start a broker (`brokered-shell serve`) with these variables: the broker would
# route its own deletes back to itself.

__bsh_sd_env_main() {
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

  local client="$dir/broker-delete.cjs"
  local node_shim="$dir/node-safe-delete.cjs"
  local python_dir="$dir/python"
  local bash_shim="$dir/safe-delete.sh"

  # NODE_OPTIONS is split on spaces unless quoted; quote the path, escaping \ and ".
  local quoted=${node_shim//\\/\\\\}
  quoted=\"${quoted//\"/\\\"}\"
  local node_options=${NODE_OPTIONS:-}
  case " $node_options " in
    *"$node_shim"*) ;;
    *) node_options="--require $quoted${node_options:+ $node_options}" ;;
  esac

  local python_path=${PYTHONPATH:-}
  case ":$python_path:" in
    *":$python_dir:"*) ;;
    *) python_path="$python_dir${python_path:+:$python_path}" ;;
  esac

  local next_bash_env=${BROKERED_SHELL_SAFE_DELETE_NEXT_BASH_ENV:-}
  if [ -n "${BASH_ENV:-}" ] && [ "$BASH_ENV" != "$bash_shim" ]; then
    next_bash_env=$BASH_ENV
  fi

  __bsh_sd_env_client=$client
  __bsh_sd_env_node_options=$node_options
  __bsh_sd_env_python_path=$python_path
  __bsh_sd_env_bash_env=$bash_shim
  __bsh_sd_env_next=$next_bash_env
}

__bsh_sd_env_quote() {
  # Single-quoted for any POSIX shell: ' becomes '\''.
  printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

if __bsh_sd_env_main; then
  if (return 0 2>/dev/null); then
    export BROKERED_SHELL_SAFE_DELETE_CLIENT="$__bsh_sd_env_client"
    export NODE_OPTIONS="$__bsh_sd_env_node_options"
    export PYTHONPATH="$__bsh_sd_env_python_path"
    export BASH_ENV="$__bsh_sd_env_bash_env"
    if [ -n "$__bsh_sd_env_next" ]; then export BROKERED_SHELL_SAFE_DELETE_NEXT_BASH_ENV="$__bsh_sd_env_next"; fi
  else
    printf 'export BROKERED_SHELL_SAFE_DELETE_CLIENT=%s\n' "$(__bsh_sd_env_quote "$__bsh_sd_env_client")"
    printf 'export NODE_OPTIONS=%s\n' "$(__bsh_sd_env_quote "$__bsh_sd_env_node_options")"
    printf 'export PYTHONPATH=%s\n' "$(__bsh_sd_env_quote "$__bsh_sd_env_python_path")"
    printf 'export BASH_ENV=%s\n' "$(__bsh_sd_env_quote "$__bsh_sd_env_bash_env")"
    if [ -n "$__bsh_sd_env_next" ]; then
      printf 'export BROKERED_SHELL_SAFE_DELETE_NEXT_BASH_ENV=%s\n' "$(__bsh_sd_env_quote "$__bsh_sd_env_next")"
    fi
  fi
else
  printf 'brokered-shell safe-delete: cannot find the shims directory\n' >&2
fi
unset -f __bsh_sd_env_main __bsh_sd_env_quote
unset __bsh_sd_env_client __bsh_sd_env_node_options __bsh_sd_env_python_path __bsh_sd_env_bash_env __bsh_sd_env_next
