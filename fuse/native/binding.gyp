{
  "targets": [
    {
      "target_name": "mdvfs_fuse",
      "sources": ["mdvfs_fuse.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "<!@(pkg-config --cflags-only-I fuse3 | sed 's/-I//g')"],
      "libraries": ["<!@(pkg-config --libs fuse3)"],
      "cflags_cc": ["-std=c++17", "-fexceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
      "xcode_settings": { "GCC_ENABLE_CPP_EXCEPTIONS": "YES", "CLANG_CXX_LANGUAGE_STANDARD": "c++17" }
    }
  ]
}
