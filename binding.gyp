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
        "native/addon/seccomp-notif-probe.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "native/include"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra"],
      "cflags_cc!": ["-fno-exceptions"]
    }
  ]
}
