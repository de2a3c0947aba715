{
  "targets": [
    {
      "target_name": "prosody",
      "sources": ["src/addon.cc"],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "../../include"
      ],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags!": ["-fno-exceptions"],
      "defines!": ["NAPI_DISABLE_CPP_EXCEPTIONS"],
      "libraries": ["-L<(module_root_dir)/native", "-lprosody"],
      "conditions": [
        ["OS=='mac'", {
          "libraries": ["-Wl,-rpath,@loader_path"],
          "xcode_settings": {
            "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
            "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
            "OTHER_CPLUSPLUSFLAGS": ["-O2"]
          }
        }, {
          "libraries": ["-Wl,-rpath,'$$ORIGIN'"]
        }]
      ]
    }
  ]
}
