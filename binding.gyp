{
  "targets": [
    {
      "target_name": "brokered_shell_native",
      "sources": [
        "native/addon/binding.cc",
        "native/addon/args.cc",
        "native/addon/errno-error.cc",
        "native/addon/peer-credentials.cc",
        "native/addon/xattr.cc",
        "native/addon/no-symlink-open.cc",
        "native/addon/fs-at.cc",
        "native/addon/kernel-probe.cc",
        "native/addon/seccomp-notif-probe.cc",
        "native/addon/send-fd.cc",
        "native/addon/plain-walk.cc",
        "native/addon/terminal.cc",
        "native/addon/write-lease.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "native/include"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra"],
      "cflags_cc!": ["-fno-exceptions"]
    },
    {
      "target_name": "brokered-sandbox",
      "type": "executable",
      "sources": [
        "native/sandbox/main.c",
        "native/sandbox/kernel-check.c",
        "native/sandbox/child.c",
        "native/sandbox/caps.c",
        "native/sandbox/landlock.c",
        "native/sandbox/seccomp-filter.c",
        "native/sandbox/notify-loop.c",
        "native/sandbox/syscall-decode.c",
        "native/sandbox/op-decode.c",
        "native/sandbox/target-memory.c",
        "native/sandbox/target-proc.c",
        "native/sandbox/path-resolve.c",
        "native/sandbox/fast-path.c",
        "native/sandbox/noop-meta.c",
        "native/sandbox/onbehalf.c",
        "native/sandbox/refusal.c",
        "native/sandbox/set-id.c",
        "native/sandbox/ioctl.c",
        "native/sandbox/connect.c",
        "native/sandbox/broker-channel.c",
        "native/sandbox/reaper.c",
        "native/sandbox/preload-mode.c"
      ],
      "include_dirs": ["native/include"],
      "defines": ["_GNU_SOURCE"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Werror"]
    },
    {
      "target_name": "brokered-request",
      "type": "executable",
      "sources": ["native/client/brokered-request.c"],
      "defines": ["_GNU_SOURCE"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Werror"]
    },
    {
      "target_name": "brokered-preload",
      "type": "shared_library",
      "product_prefix": "",
      "product_extension": "so",
      "sources": [
        "native/preload/real.c",
        "native/preload/config.c",
        "native/preload/writer.c",
        "native/preload/json-scan.c",
        "native/preload/errno-names.c",
        "native/preload/channel.c",
        "native/preload/ask.c",
        "native/preload/paths.c",
        "native/preload/decide.c",
        "native/preload/set-id.c",
        "native/preload/hooks-open.c",
        "native/preload/hooks-stdio.c",
        "native/preload/hooks-tempfile.c",
        "native/preload/hooks-names.c",
        "native/preload/hooks-meta.c",
        "native/preload/hooks-spawn.c"
      ],
      "defines": ["_GNU_SOURCE"],
      "cflags": ["-std=gnu11", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror"],
      "ldflags": ["-Wl,--no-undefined"],
      "libraries": ["-ldl", "-lpthread"]
    }
  ]
}
