// Python binding of the native reader. Keep this file to bindings only: logic lives in its own units.
#include <curl/curl.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

namespace nb = nanobind;

NB_MODULE(_native, m) {
    m.doc() = "Private compiled core of native_loader. Use the public `native_loader` package.";
    m.def("version", [] { return std::string(NATIVE_LOADER_VERSION); },
          "Version of the native library.");
    m.def("curl_version", [] { return std::string(curl_version_info(CURLVERSION_NOW)->version); },
          "Version of the libcurl the native library is linked against.");
    m.def("curl_ssl_version", [] {
              const char *ssl = curl_version_info(CURLVERSION_NOW)->ssl_version;
              return std::string(ssl ? ssl : "");
          },
          "TLS backend of the linked libcurl.");
}
