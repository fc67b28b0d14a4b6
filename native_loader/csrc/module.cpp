// Python binding of the native reader. Bindings only: logic lives in its own units.
#include <curl/curl.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <tuple>
#include <string>
#include <thread>

#include "buffer.hpp"
#include "engine.hpp"
#include "file_reader.hpp"
#include "s3.hpp"
#include "sigv4.hpp"
#include "url.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing() != 0;
#else
    return _Py_IsFinalizing() != 0;
#endif
}

// Releases the GIL around a blocking call and takes it back after. Before Python 3.14 a thread
// that takes the GIL back while the interpreter finalizes (a daemon thread mid-read when a
// script or a kernel exits) is ended with pthread_exit, whose unwind through this destructor
// calls std::terminate and aborts the process. Such a thread is parked instead, as Python 3.14
// parks it: the process is ending, and the thread holds no lock.
class BlockingCall {
  public:
    BlockingCall() : state_(PyEval_SaveThread()) {}
    ~BlockingCall() {
        while (interpreter_finalizing()) std::this_thread::sleep_for(std::chrono::seconds(1));
        PyEval_RestoreThread(state_);
    }
    BlockingCall(const BlockingCall &) = delete;
    BlockingCall &operator=(const BlockingCall &) = delete;

  private:
    PyThreadState *state_;
};

// Bytes owned by a shared Storage, exposed with the buffer protocol (writable, 1-D, "B").
struct Buffer {
    std::shared_ptr<nl::Storage> storage;
};

int buffer_get(PyObject *self, Py_buffer *view, int flags) {
    Buffer *b = nullptr;
    try {
        b = nb::inst_ptr<Buffer>(nb::handle(self));
    } catch (...) {
        b = nullptr;
    }
    if (b == nullptr || !nb::inst_ready(nb::handle(self)) || !b->storage) {
        PyErr_SetString(PyExc_BufferError, "buffer holds no data");
        view->obj = nullptr;
        return -1;
    }
    return PyBuffer_FillInfo(view, self, b->storage->data,
                             static_cast<Py_ssize_t>(b->storage->size), 0, flags);
}

void buffer_release(PyObject *, Py_buffer *) {}

PyType_Slot buffer_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void *>(buffer_get)},
    {Py_bf_releasebuffer, reinterpret_cast<void *>(buffer_release)},
    {0, nullptr},
};

Buffer wrap(std::shared_ptr<nl::Storage> s) { return Buffer{std::move(s)}; }

// A result's bytes for Python, or None where it has none (yet).
std::optional<Buffer> wrap_if_any(const std::shared_ptr<nl::Storage> &s) {
    if (!s) return std::nullopt;
    return wrap(s);
}

}  // namespace

NB_MODULE(_native, m) {
    m.attr("SHARED_LIMITER_BYTES") = sizeof(nl::SharedRateLimiter);
    m.doc() = "Private compiled core of native_loader. Use the public `native_loader` package.";
    // Engines abandoned in a forked child are kept alive on purpose (their thread is gone).
    nb::set_leak_warnings(false);

    m.def("version", [] { return std::string(NATIVE_LOADER_VERSION); },
          "Version of the native library.");
    m.def("curl_version", [] { return std::string(curl_version_info(CURLVERSION_NOW)->version); },
          "Version of the libcurl the native library is linked against.");
    m.def("curl_ssl_version", [] {
              const char *ssl = curl_version_info(CURLVERSION_NOW)->ssl_version;
              return std::string(ssl ? ssl : "");
          },
          "TLS backend of the linked libcurl.");

    nb::class_<Buffer>(m, "Buffer", nb::type_slots(buffer_slots),
                       "Bytes of one result; supports the buffer protocol without copies.")
        .def("__init__", [](Buffer *self, const Buffer &other) { new (self) Buffer{other.storage}; },
             "other"_a, "Share the bytes of another buffer (no copy).")
        .def("__len__", [](const Buffer &b) { return b.storage ? b.storage->size : 0; });

    m.def(
        "buffer_from",
        [](nb::bytes data) {
            auto s = std::make_shared<nl::Storage>(data.size());
            if (data.size() > 0) std::memcpy(s->data, data.c_str(), data.size());
            return wrap(std::move(s));
        },
        "data"_a, "A Buffer holding a copy of bytes (used when unpickling results).");

    m.def(
        "parse_list_page",
        [](const std::string &xml) {
            nl::ListPage page;
            std::string error;
            if (nl::parse_list_page(xml, page, error) != nl::ListParse::Ok)
                throw nb::value_error(error.c_str());
            std::vector<std::tuple<std::string, int64_t, std::string>> entries;
            for (const auto &e : page.entries) entries.emplace_back(e.key, e.size, e.etag);
            return std::make_tuple(entries, page.prefixes, page.truncated, page.next_token);
        },
        "xml"_a, "(entries, common prefixes, is truncated, continuation token) of a listing.");

    m.def("uri_encode", &nl::uri_encode, "value"_a, "keep_slash"_a,
          "RFC 3986 encoding as SigV4 wants it.");
    m.def(
        "sign",
        [](const std::string &method, const std::string &url,
           const std::vector<std::pair<std::string, std::string>> &headers,
           const std::string &access_key, const std::string &secret_key,
           const std::string &session_token, const std::string &region,
           const std::string &service, const std::string &amz_date,
           const std::string &payload_hash) {
            nl::UrlParts parts;
            if (!nl::split_url(url, parts)) throw nb::value_error("url must be http(s)://...");
            nl::SignInput in;
            in.method = method;
            in.canonical_uri = parts.path;
            in.raw_query = parts.query;
            in.host = parts.host_header();
            in.headers = headers;
            in.payload_hash = payload_hash;
            in.amz_date = amz_date;
            in.region = region;
            in.service = service;
            return nl::sigv4_sign(in, {access_key, secret_key, session_token});
        },
        "method"_a, "url"_a, "headers"_a, "access_key"_a, "secret_key"_a, "session_token"_a,
        "region"_a, "service"_a, "amz_date"_a, "payload_hash"_a,
        "SigV4 headers to add to a request (x-amz-date, ..., authorization).");

    m.def(
        "read_file",
        [](const std::string &path, int64_t offset, int64_t length) {
            nl::FileRead r;
            {
                BlockingCall release;
                r = nl::read_file(path, offset, length);
            }
            std::optional<Buffer> data;
            if (r.data) data = wrap(r.data);
            return std::make_tuple(
                data, r.error, r.file_size, r.mtime_ns, r.size_after, r.mtime_ns_after);
        },
        "path"_a, "offset"_a, "length"_a,
        "(Buffer | None, errno, file size, mtime ns, size after, mtime ns after) for a byte "
        "range of a local file: its size and modification time as opened and once read.");

    // Bound field by field, once: Python fills it in one loop over ReaderConfig's fields
    // (native_loader/_client.py: engine_config).
    nb::class_<nl::EngineConfig>(m, "EngineConfig", "Settings of an Engine.")
        .def(nb::init<>())
        .def_rw("endpoint", &nl::EngineConfig::endpoint)
        .def_rw("region", &nl::EngineConfig::region)
        .def_rw("path_style", &nl::EngineConfig::path_style)
        .def_rw("unsigned", &nl::EngineConfig::unsigned_requests)  // a C++ keyword
        .def_rw("max_inflight_requests", &nl::EngineConfig::max_inflight_requests)
        .def_rw("max_inflight_bytes", &nl::EngineConfig::max_inflight_bytes)
        .def_rw("part_size", &nl::EngineConfig::part_size)
        .def_rw("connect_timeout_s", &nl::EngineConfig::connect_timeout_s)
        .def_rw("first_byte_timeout_s", &nl::EngineConfig::first_byte_timeout_s)
        .def_rw("stall_timeout_s", &nl::EngineConfig::stall_timeout_s)
        .def_rw("max_attempts", &nl::EngineConfig::max_attempts)
        .def_rw("backoff_base_s", &nl::EngineConfig::backoff_base_s)
        .def_rw("backoff_max_s", &nl::EngineConfig::backoff_max_s)
        .def_rw("adaptive_rate", &nl::EngineConfig::adaptive_rate)
        .def_rw("max_throttled_s", &nl::EngineConfig::max_throttled_s)
        .def_rw("ca_bundle", &nl::EngineConfig::ca_bundle);

    nb::enum_<nl::ErrorKind>(m, "ErrorKind", "Why a request failed (NONE: it did not).")
        .value("NONE", nl::ErrorKind::None)
        .value("HTTP", nl::ErrorKind::Http, "S3 answered with an error status.")
        .value("TIMEOUT", nl::ErrorKind::Timeout, "Connect, first-byte or stall timeout.")
        .value("CONNECT", nl::ErrorKind::Connect, "The endpoint could not be reached.")
        .value("NETWORK", nl::ErrorKind::Network, "Reset, empty reply, truncated body, ...")
        .value("PROTOCOL", nl::ErrorKind::Protocol, "An answer the reader cannot use.")
        .value("MEMORY", nl::ErrorKind::Memory, "The result could not be allocated.")
        .value("CLOSED", nl::ErrorKind::Closed, "The reader was closed during the request.");

    // S3Reader.stats() returns these fields as a dict, in this order.
    nb::class_<nl::EngineStats>(m, "EngineStats", "Counters of an Engine.")
        .def(nb::init<>())
        .def_ro("active_requests", &nl::EngineStats::active_requests)
        .def_ro("peak_active_requests", &nl::EngineStats::peak_active_requests)
        .def_ro("inflight_bytes", &nl::EngineStats::inflight_bytes)
        .def_ro("peak_inflight_bytes", &nl::EngineStats::peak_inflight_bytes)
        .def_ro("requests", &nl::EngineStats::requests)
        .def_ro("connections", &nl::EngineStats::connections)
        .def_ro("retries", &nl::EngineStats::retries)
        .def_ro("bytes_received", &nl::EngineStats::bytes_received)
        .def_ro("open_tickets", &nl::EngineStats::open_tickets)
        .def_ro("throttled", &nl::EngineStats::throttled)
        .def_ro("rate_cuts", &nl::EngineStats::rate_cuts)
        .def_ro("send_rate_limit", &nl::EngineStats::send_rate_limit)
        .def_ro("rate_limited_ms", &nl::EngineStats::rate_limited_ms);

    nb::class_<nl::Outcome>(m, "Outcome", "What a finished ticket produced.")
        .def_prop_ro("data", [](const nl::Outcome &o) { return wrap_if_any(o.data); })
        .def_ro("object_size", &nl::Outcome::object_size)
        .def_ro("etag", &nl::Outcome::etag)
        .def_prop_ro("entries",
                     [](const nl::Outcome &o) {
                         std::vector<std::tuple<std::string, int64_t, std::string>> out;
                         for (const auto &e : o.list.entries) out.emplace_back(e.key, e.size, e.etag);
                         return out;
                     })
        .def_prop_ro("prefixes", [](const nl::Outcome &o) { return o.list.prefixes; })
        .def_prop_ro("truncated", [](const nl::Outcome &o) { return o.list.truncated; })
        .def_prop_ro("next_token", [](const nl::Outcome &o) { return o.list.next_token; })
        .def_ro("error_kind", &nl::Outcome::error_kind)
        .def_ro("status", &nl::Outcome::status)
        .def_ro("code", &nl::Outcome::code)
        .def_ro("message", &nl::Outcome::message)
        .def_ro("request_id", &nl::Outcome::request_id)
        .def_ro("attempts", &nl::Outcome::attempts)
        .def_ro("first_byte_s", &nl::Outcome::first_byte_s)
        .def_ro("elapsed_s", &nl::Outcome::elapsed_s);

    nb::class_<nl::Progress>(m, "Progress", "How far an unfinished GET has come.")
        .def_prop_ro("data", [](const nl::Progress &p) { return wrap_if_any(p.data); })
        .def_ro("readable", &nl::Progress::readable)
        .def_ro("complete", &nl::Progress::complete)
        .def_ro("object_size", &nl::Progress::object_size)
        .def_ro("etag", &nl::Progress::etag);

    nb::class_<nl::Engine>(m, "Engine", "Background libcurl multi loop for one process.")
        .def(nb::init<nl::EngineConfig>(), "config"_a)
        .def(
            "set_credentials",
            [](nl::Engine &e, const std::string &access_key, const std::string &secret_key,
               const std::string &session_token) {
                e.set_credentials({access_key, secret_key, session_token});
            },
            "access_key"_a, "secret_key"_a, "session_token"_a)
        .def(
            "share_rate_limiter",
            [](nl::Engine &e, uintptr_t address) {
                e.share_rate_limiter(reinterpret_cast<void *>(address));
            },
            "address"_a,
            "Use the send-rate limiter at this address of shared memory (SHARED_LIMITER_BYTES, "
            "zero-filled when mapped, kept mapped while the engine lives).")
        .def("submit_get", &nl::Engine::submit_get, "bucket"_a, "key"_a, "offset"_a, "length"_a,
             "size_hint"_a = -1, "part_size"_a = 0)
        .def("submit_head", &nl::Engine::submit_head, "bucket"_a, "key"_a)
        .def("submit_list", &nl::Engine::submit_list, "bucket"_a, "prefix"_a, "delimiter"_a,
             "token"_a, "max_keys"_a)
        .def("wait", &nl::Engine::wait, "ticket"_a, "timeout_s"_a,
             nb::call_guard<BlockingCall>())
        .def("wait_any", &nl::Engine::wait_any, "tickets"_a, "timeout_s"_a,
             nb::call_guard<BlockingCall>())
        .def("wait_readable", &nl::Engine::wait_readable, "ticket"_a, "min_bytes"_a,
             "timeout_s"_a, nb::call_guard<BlockingCall>())
        .def("take", &nl::Engine::take, "ticket"_a)
        .def("cancel", &nl::Engine::cancel, "ticket"_a)
        .def("close", &nl::Engine::close, nb::call_guard<BlockingCall>())
        .def("stats", &nl::Engine::stats);
}
