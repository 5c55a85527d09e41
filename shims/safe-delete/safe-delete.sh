# shellcheck shell=bash
# brokered-shell safe-delete for bash: `rm`, `unlink` and `rmdir` as shell functions that
# send each path to the broker (policy check, backup, freedesktop trash) through the
# safe-delete client, and use the local trash when no broker is reachable.
#
# Load it with `source safe-delete.sh`, or for non-interactive bash with
# BASH_ENV=/path/to/safe-delete.sh (see env.sh). Nothing here deletes permanently:
#   - client exit 0  -> done, the command returns 0
#   - client exit 1  -> denied or failed, the command returns 1 (the reason is on stderr)
#   - client exit 2  -> broker unreachable: the client runs again with --local
# Options these functions do not know run the real command (`command rm ...`) unchanged,
# so no option silently changes meaning. `rm -i`/`-I`/`--interactive` are refused: an
# agent's command has no one to answer the prompt, and the real rm would delete for good.
# The real commands stay reachable as `command rm`, `/bin/rm`, ...

[ -n "${BASH_VERSION:-}" ] || return 0 2>/dev/null || exit 0

__bsh_sd_source=${BASH_SOURCE[0]}
case $__bsh_sd_source in
  /*) ;;
  *) __bsh_sd_source=$PWD/$__bsh_sd_source ;;
esac
__bsh_sd_dir=${__bsh_sd_source%/*}
unset __bsh_sd_source

__bsh_sd_say() {
  printf 'brokered-shell safe-delete: %s\n' "$*" >&2
}

# Run the client: __bsh_sd_delete FLAG... -- PATH...
# Exit 2 (no broker reachable, nothing sent) runs it again with --local.
# Returns 0 (all in the trash / nothing to do) or 1 (denied, failed, client not runnable).
__bsh_sd_delete() {
  local node=${BROKERED_SHELL_NODE:-node}
  local client=${BROKERED_SHELL_SAFE_DELETE_CLIENT:-$__bsh_sd_dir/broker-delete.cjs}
  local rc=0
  if [ ! -r "$client" ]; then
    __bsh_sd_say "the safe-delete client $client is missing; nothing was deleted"
    return 1
  fi
  BROKERED_SHELL_SAFE_DELETE_IN_CLIENT=1 command "$node" "$client" --quiet "$@" || rc=$?
  if [ "$rc" -eq 2 ]; then
    rc=0
    BROKERED_SHELL_SAFE_DELETE_IN_CLIENT=1 command "$node" "$client" --quiet --local "$@" || rc=$?
  fi
  case $rc in
    0 | 1) ;;
    126 | 127)
      __bsh_sd_say "cannot run the safe-delete client ($node $client); nothing was deleted"
      rc=1
      ;;
    *) rc=1 ;;
  esac
  return "$rc"
}

# True when PATH is a directory itself (not a link to one).
__bsh_sd_is_dir() {
  [ -d "$1" ] && [ ! -L "$1" ]
}

# GNU long options may be abbreviated to any unambiguous prefix:
# __bsh_sd_long --ARG NAME... sets __bsh_sd_option to the one NAME it names, else "".
# An option with "=VALUE" that takes none, or an ambiguous prefix, yields "".
__bsh_sd_long() {
  local given=${1#--} name match="" count=0
  shift
  case $given in *=*) __bsh_sd_option="" ; return 0 ;; esac
  for name in "$@"; do
    if [ "$name" = "$given" ]; then
      match=$name
      count=1
      break
    fi
    case $name in
      "$given"*) match=$name count=$((count + 1)) ;;
    esac
  done
  if [ "$count" -eq 1 ]; then __bsh_sd_option=$match; else __bsh_sd_option=""; fi
  return 0
}

rm() {
  local force=0 recursive=0 dir=0 verbose=0 interactive=0 done_opts=0
  local arg i c
  local -a paths=()
  for arg in "$@"; do
    if [ "$done_opts" -eq 0 ] && [ "$arg" = "--" ]; then
      done_opts=1
      continue
    fi
    if [ "$done_opts" -eq 1 ] || [ "$arg" = "-" ] || [ "${arg#-}" = "$arg" ]; then
      paths+=("$arg")
      continue
    fi
    case $arg in
      --interactive=?*)
        # WHEN may be abbreviated too: never/no/none turn prompting off, the rest on.
        case never/no/none/ in
          "${arg#--interactive=}"*/* | */"${arg#--interactive=}"*/*) interactive=0 ;;
          *) interactive=1 force=0 ;;
        esac
        continue
        ;;
      --*)
        __bsh_sd_long "$arg" force interactive one-file-system no-preserve-root preserve-root recursive dir verbose help version
        case $__bsh_sd_option in
          force) force=1 interactive=0 ;;
          interactive) interactive=1 force=0 ;;
          recursive) recursive=1 ;;
          dir) dir=1 ;;
          verbose) verbose=1 ;;
          preserve-root) ;;
          *)
            command rm "$@"
            return
            ;;
        esac
        continue
        ;;
      *)
        for ((i = 1; i < ${#arg}; i++)); do
          c=${arg:i:1}
          case $c in
            f) force=1 interactive=0 ;;
            i | I) interactive=1 force=0 ;;
            r | R) recursive=1 ;;
            d) dir=1 ;;
            v) verbose=1 ;;
            *)
              command rm "$@"
              return
              ;;
          esac
        done
        ;;
    esac
  done
  if [ "$interactive" -eq 1 ]; then
    __bsh_sd_say "rm: interactive removal (-i, -I, --interactive) is not supported; nothing was deleted (drop the option; \`command rm -i\` deletes permanently)"
    return 1
  fi
  if [ "${#paths[@]}" -eq 0 ]; then
    command rm "$@"
    return
  fi

  # One client run for all operands: one node start, and the broker sees them in order.
  local -a flags=()
  [ "$force" -eq 0 ] || flags+=(--force)
  if [ "$recursive" -eq 1 ]; then
    flags+=(--recursive)
  elif [ "$dir" -eq 1 ]; then
    flags+=(--dir)
  fi
  [ "$verbose" -eq 0 ] || flags+=(--verbose)
  __bsh_sd_delete ${flags[@]+"${flags[@]}"} -- "${paths[@]}"
}

unlink() {
  # unlink takes exactly one operand; anything else (--help, --version, a typo) goes to
  # the real command, which prints its own message and deletes nothing.
  local operand
  if [ "$#" -eq 2 ] && [ "$1" = "--" ]; then
    operand=$2
  elif [ "$#" -eq 1 ] && { [ "$1" = "-" ] || [ "${1#-}" = "$1" ]; }; then
    operand=$1
  else
    command unlink "$@"
    return
  fi
  __bsh_sd_delete -- "$operand"
}

rmdir() {
  local parents=0 verbose=0 ignore_nonempty=0 done_opts=0
  local arg i c
  local -a dirs=()
  for arg in "$@"; do
    if [ "$done_opts" -eq 0 ] && [ "$arg" = "--" ]; then
      done_opts=1
      continue
    fi
    if [ "$done_opts" -eq 1 ] || [ "$arg" = "-" ] || [ "${arg#-}" = "$arg" ]; then
      dirs+=("$arg")
      continue
    fi
    case $arg in
      --*)
        __bsh_sd_long "$arg" ignore-fail-on-non-empty parents verbose help version
        case $__bsh_sd_option in
          parents) parents=1 ;;
          verbose) verbose=1 ;;
          ignore-fail-on-non-empty) ignore_nonempty=1 ;;
          *)
            command rmdir "$@"
            return
            ;;
        esac
        continue
        ;;
      *)
        for ((i = 1; i < ${#arg}; i++)); do
          c=${arg:i:1}
          case $c in
            p) parents=1 ;;
            v) verbose=1 ;;
            *)
              command rmdir "$@"
              return
              ;;
          esac
        done
        ;;
    esac
  done
  if [ "${#dirs[@]}" -eq 0 ]; then
    command rmdir "$@"
    return
  fi

  local status=0 dir current
  for dir in "${dirs[@]}"; do
    current=$dir
    while :; do
      if [ "$ignore_nonempty" -eq 1 ] && __bsh_sd_is_dir "$current" && [ -n "$(command ls -A -- "$current" 2>/dev/null)" ]; then
        break
      fi
      if [ "$verbose" -eq 1 ]; then
        printf "rmdir: removing directory, '%s'\n" "$current"
      fi
      if ! __bsh_sd_delete --rmdir -- "$current"; then
        status=1
        break
      fi
      [ "$parents" -eq 1 ] || break
      # rmdir -p a/b/c: then a/b, then a (trailing slashes first dropped).
      while [ "${current%/}" != "$current" ] && [ "$current" != "/" ]; do current=${current%/}; done
      case $current in
        */*) current=${current%/*} ;;
        *) break ;;
      esac
      while [ "${current%/}" != "$current" ] && [ "$current" != "/" ]; do current=${current%/}; done
      if [ -z "$current" ] || [ "$current" = "/" ] || [ "$current" = "." ]; then break; fi
    done
  done
  return "$status"
}

# Chain to a BASH_ENV that env.sh found already set, so loading these shims does not
# drop another start-up file.
if [ -n "${BROKERED_SHELL_SAFE_DELETE_NEXT_BASH_ENV:-}" ] && [ "${BROKERED_SHELL_SAFE_DELETE_NEXT_BASH_ENV}" != "$__bsh_sd_dir/safe-delete.sh" ] && [ -r "${BROKERED_SHELL_SAFE_DELETE_NEXT_BASH_ENV}" ]; then
  # shellcheck disable=SC1090
  . "${BROKERED_SHELL_SAFE_DELETE_NEXT_BASH_ENV}"
fi
