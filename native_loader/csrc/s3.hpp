// S3 request targets (addressing styles), response parsing (ListObjectsV2, error bodies,
// Content-Range) and the error/retry classification shared by the engine.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "url.hpp"

namespace nl {

struct ListEntry {
    std::string key;
    int64_t size = 0;
    std::string etag;
};

struct ListPage {
    std::vector<ListEntry> entries;
    std::vector<std::string> prefixes;
    bool truncated = false;
    std::string next_token;
};

struct S3ErrorBody {
    std::string code;
    std::string message;
    std::string request_id;
};

struct RequestTarget {
    std::string url;            // what curl fetches
    std::string canonical_uri;  // encoded path, as signed
    std::string raw_query;      // encoded query, as signed
    std::string host;           // Host header value, as signed
};

// Where a bucket/key lives on an endpoint. path_style: https://host/bucket/key, otherwise
// https://bucket.host/key.
RequestTarget make_target(const UrlParts &endpoint, bool path_style, const std::string &bucket,
                          const std::string &key,
                          const std::vector<std::pair<std::string, std::string>> &query);

// How a listing body parsed: Ok, or why not (error says it in words).
enum class ListParse {
    Ok,
    CutShort,  // the body ends before </ListBucketResult>: a broken transfer, worth another try
    NoToken,   // IsTruncated=true without a NextContinuationToken: a broken proxy or server
    Invalid,   // not a ListBucketResult at all
};

// Parses a ListObjectsV2 response body into out; anything but Ok sets error.
ListParse parse_list_page(const std::string &xml, ListPage &out, std::string &error);

// Code, Message and RequestId of an S3 <Error> body; fields stay empty when absent.
S3ErrorBody parse_error_body(const std::string &xml);

// "bytes first-last/total" -> true and the three numbers; total is -1 for "*".
bool parse_content_range(const std::string &value, int64_t &first, int64_t &last, int64_t &total);

// The S3 error code to report when a response carries none (HEAD responses have no body).
std::string default_error_code(int status, bool bucket_level);

// Whether an S3 answer is worth retrying: 5xx, 429, SlowDown, RequestTimeout, InternalError...
bool is_retryable_status(int status, const std::string &code);
// Whether an error answer asks the client to lower its request rate (botocore's throttling
// codes, S3's SlowDown, HTTP 429).
bool is_throttle(int status, const std::string &code);

}  // namespace nl
