// Classifying how one attempt of one part ended, as a pure function: a curl code, an abort
// by the engine or an HTTP status becomes a verdict (done, or a Failure with its retryability).
// The engine applies the verdict (engine_attempt.cpp: on_done).
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <string>

#include "engine_types.hpp"
#include "s3.hpp"

namespace nl {

// What one finished attempt looked like, read off its part, its ticket and its curl handle.
// References: the part outlives the call.
struct AttemptReport {
    RequestKind kind;
    CURLcode curl_code;
    const char *curl_error;       // the handle's error buffer; empty: use curl's text for the code
    int status;                   // HTTP status, 0 without a response
    ErrorKind abort_kind;         // set when a callback or a timeout aborted the attempt
    const std::string &abort_message;
    bool writing;                 // GET: the body went into the result
    int64_t copied;               // GET: body bytes copied into the result
    int64_t expected;             // GET: bytes this attempt had to deliver
    bool first_part;              // the ticket's first part
    int64_t offset;               // the ticket's first byte
    bool layout_known;            // the ticket knows the object's size
    int64_t object_size;          // ... which is this
    const ResponseHeaders &headers;
    const std::string &body;      // error or listing body
};

enum class Verdict {
    Failed,       // see `failure`; the scheduler decides about another attempt
    PartDone,     // GET: the part delivered all its bytes
    EmptyObject,  // GET: a range request on an empty object (416 on the first part); `etag`
    HeadDone,     // `object_size` (-1 when not given), `etag`
    ListDone,     // `list`
};

struct Classified {
    Verdict verdict = Verdict::Failed;
    Failure failure;
    int64_t object_size = -1;
    std::string etag;
    ListPage list;
};

Classified classify_attempt(const AttemptReport &r);

}  // namespace nl
