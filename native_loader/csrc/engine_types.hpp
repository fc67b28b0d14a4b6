// The engine's vocabulary, shared by the engine and its pure pieces (request.hpp, classify.hpp):
// what goes in (EngineConfig), what comes out (Outcome, ErrorKind, EngineStats) and how an
// attempt failed (Failure). Each struct is bound to Python once, field by field, in module.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "buffer.hpp"
#include "s3.hpp"

namespace nl {

using Clock = std::chrono::steady_clock;
using ResponseHeaders = std::map<std::string, std::string>;  // lower-case name -> value

inline double seconds_since(Clock::time_point t, Clock::time_point now) {
    return std::chrono::duration<double>(now - t).count();
}

inline std::string header_value(const ResponseHeaders &h, const std::string &name) {
    auto it = h.find(name);
    return it == h.end() ? "" : it->second;
}

// The engine's settings. No defaults here: Python's ReaderConfig holds them, and
// native_loader/_client.py fills every field (the zeros below fail the engine's checks).
struct EngineConfig {
    std::string endpoint;  // scheme://host[:port][/base]
    std::string region;
    bool path_style = false;
    bool unsigned_requests = false;
    int max_inflight_requests = 0;
    int64_t max_inflight_bytes = 0;
    int64_t part_size = 0;
    double connect_timeout_s = 0.0;
    double first_byte_timeout_s = 0.0;
    double stall_timeout_s = 0.0;
    int max_attempts = 0;
    double backoff_base_s = 0.0;
    double backoff_max_s = 0.0;
    bool adaptive_rate = false;    // cut the send rate on throttles (rate_limiter.hpp)
    double max_throttled_s = 0.0;  // a part throttled without a break this long fails
    std::string ca_bundle;  // PEM file of trusted CAs; empty: the system's
};

// Why a ticket failed. Python maps each kind to an exception in native_loader/errors.py.
enum class ErrorKind {
    None,      // success
    Http,      // S3 answered with an error status
    Timeout,   // connect, first-byte or stall timeout
    Connect,   // the endpoint could not be reached
    Network,   // reset, empty reply, truncated body, ...
    Protocol,  // an answer the reader cannot use (bad Content-Range, changed object, ...)
    Memory,    // the result could not be allocated
    Closed,    // the reader was closed while the request ran
};

enum class RequestKind { Get, Head, List };

// What a finished ticket produced.
struct Outcome {
    std::shared_ptr<Storage> data;  // GET
    int64_t object_size = -1;       // GET, HEAD
    std::string etag;               // GET, HEAD
    ListPage list;                  // LIST
    ErrorKind error_kind = ErrorKind::None;
    int status = 0;
    std::string code;
    std::string message;
    std::string request_id;
    int attempts = 0;
    double first_byte_s = 0.0;
    double elapsed_s = 0.0;
};

// How far an unfinished GET has come (Engine::wait_readable): the bytes of its result written so
// far from its start, in order, which a caller may read while the rest arrives.
struct Progress {
    std::shared_ptr<Storage> data;  // null until the first answer's headers
    int64_t readable = 0;           // bytes of data, from its start, that are final
    bool complete = false;          // finished (then take() gives the outcome, errors included)
    int64_t object_size = -1;
    std::string etag;
};

struct EngineStats {
    int64_t active_requests = 0;
    int64_t peak_active_requests = 0;
    int64_t inflight_bytes = 0;  // bytes reserved by unfinished or not yet collected results
    int64_t peak_inflight_bytes = 0;
    int64_t requests = 0;
    int64_t connections = 0;  // new connections opened (the rest reused kept-alive ones)
    int64_t retries = 0;
    int64_t bytes_received = 0;
    int64_t open_tickets = 0;
    int64_t throttled = 0;        // answers that throttled (503 SlowDown, 429, Throttling...)
    int64_t rate_cuts = 0;        // times the adaptive limiter cut the send rate
    int64_t send_rate_limit = 0;  // requests/s the limiter allows now; 0: not limiting
    int64_t rate_limited_ms = 0;  // time requests waited for the limiter, summed over waits
};

// How one attempt of one part failed, and whether another attempt may succeed.
struct Failure {
    ErrorKind kind = ErrorKind::None;
    int status = 0;
    std::string code;
    std::string message;
    std::string request_id;
    bool retryable = false;
    bool throttled = false;  // the endpoint asked for a lower request rate
};

}  // namespace nl
