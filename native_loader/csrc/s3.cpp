// S3 request targets, response parsing and error classification.
#include "s3.hpp"

#include <cstdlib>

namespace nl {

namespace {

// Inner text of the first <tag>...</tag> in xml[from, to), entity-decoded. npos when absent.
size_t find_element(const std::string &xml, const std::string &tag, size_t from, size_t to,
                    std::string &text) {
    const std::string open = "<" + tag + ">";
    const std::string close = "</" + tag + ">";
    size_t start = xml.find(open, from);
    if (start == std::string::npos || start >= to) {
        // An empty element may be written as <tag/>.
        size_t empty = xml.find("<" + tag + "/>", from);
        if (empty != std::string::npos && empty < to) {
            text.clear();
            return empty;
        }
        return std::string::npos;
    }
    size_t body = start + open.size();
    size_t end = xml.find(close, body);
    if (end == std::string::npos || end > to) return std::string::npos;
    text = xml_unescape(xml.substr(body, end - body));
    return start;
}

std::string element(const std::string &xml, const std::string &tag, size_t from = 0,
                    size_t to = std::string::npos) {
    std::string text;
    if (find_element(xml, tag, from, to, text) == std::string::npos) return "";
    return text;
}

// [start, end) ranges of each <tag>...</tag> block (the opening tag may carry attributes).
std::vector<std::pair<size_t, size_t>> blocks(const std::string &xml, const std::string &tag) {
    std::vector<std::pair<size_t, size_t>> out;
    const std::string close = "</" + tag + ">";
    size_t pos = 0;
    while (true) {
        size_t start = xml.find("<" + tag, pos);
        if (start == std::string::npos) break;
        char next = start + tag.size() + 1 < xml.size() ? xml[start + tag.size() + 1] : '\0';
        if (next != '>' && next != ' ') {
            pos = start + 1;
            continue;
        }
        size_t end = xml.find(close, start);
        if (end == std::string::npos) break;
        out.emplace_back(start, end + close.size());
        pos = end + close.size();
    }
    return out;
}

}  // namespace

RequestTarget make_target(const UrlParts &endpoint, bool path_style, const std::string &bucket,
                          const std::string &key,
                          const std::vector<std::pair<std::string, std::string>> &query) {
    RequestTarget t;
    std::string base_path = endpoint.path == "/" ? "" : endpoint.path;
    if (!base_path.empty() && base_path.back() == '/') base_path.pop_back();
    UrlParts host = endpoint;
    if (path_style) {
        t.canonical_uri = base_path + "/" + uri_encode(bucket, false);
        if (!key.empty()) t.canonical_uri += "/" + uri_encode(key, true);
    } else {
        host.host = bucket + "." + endpoint.host;
        t.canonical_uri = base_path + "/" + uri_encode(key, true);
    }
    t.raw_query = build_query(query);
    t.host = host.host_header();
    t.url = host.origin() + t.canonical_uri + (t.raw_query.empty() ? "" : "?" + t.raw_query);
    return t;
}

ListParse parse_list_page(const std::string &xml, ListPage &out, std::string &error) {
    // A whole page ends with its root's end tag. Without it the body was cut short: a
    // connection closed early (with no Content-Length to tell), or a proxy or server sent a
    // short body whose Content-Length says so. What arrived parses as fewer entries, and
    // perhaps without IsTruncated or the token: taken as it is, a listing loses keys silently.
    const std::string root_end = "</ListBucketResult>";
    size_t last = xml.find_last_not_of(" \t\r\n");
    bool closed = last != std::string::npos && last + 1 >= root_end.size() &&
                  xml.compare(last + 1 - root_end.size(), root_end.size(), root_end) == 0;
    bool opened = xml.find("<ListBucketResult") != std::string::npos;
    if (!closed && (opened || last == std::string::npos || xml[last] != '>')) {
        error = "the page was cut short (its body ends before </ListBucketResult>, " +
                std::to_string(xml.size()) +
                " bytes): the connection closed early, or a proxy or server sent a short body; "
                "check what sits between you and the endpoint, then list again";
        return ListParse::CutShort;
    }
    if (!opened || !closed) {
        error = "response is not a ListBucketResult";
        return ListParse::Invalid;
    }
    bool url_encoded = element(xml, "EncodingType") == "url";
    auto decode = [url_encoded](std::string s) {
        if (!url_encoded) return s;
        for (auto &c : s)
            if (c == '+') c = ' ';
        return percent_decode(s);
    };
    for (const auto &[start, end] : blocks(xml, "Contents")) {
        ListEntry entry;
        std::string key;
        if (find_element(xml, "Key", start, end, key) == std::string::npos) {
            error = "a <Contents> entry has no <Key>";
            return ListParse::Invalid;
        }
        entry.key = decode(key);
        std::string size = element(xml, "Size", start, end);
        entry.size = size.empty() ? 0 : std::strtoll(size.c_str(), nullptr, 10);
        entry.etag = element(xml, "ETag", start, end);
        out.entries.push_back(std::move(entry));
    }
    for (const auto &[start, end] : blocks(xml, "CommonPrefixes")) {
        out.prefixes.push_back(decode(element(xml, "Prefix", start, end)));
    }
    out.truncated = element(xml, "IsTruncated") == "true";
    out.next_token = element(xml, "NextContinuationToken");
    if (out.truncated && out.next_token.empty()) {
        // Ending here would drop the rest of the listing without a word.
        error = "the page says it is truncated (IsTruncated=true) but gives no "
                "NextContinuationToken, so the rest of the listing cannot be asked for (S3 "
                "always sends one: a proxy or S3-compatible server dropped it); fix or bypass "
                "it, then list again";
        return ListParse::NoToken;
    }
    return ListParse::Ok;
}

S3ErrorBody parse_error_body(const std::string &xml) {
    S3ErrorBody e;
    size_t start = xml.find("<Error");
    if (start == std::string::npos) return e;
    e.code = element(xml, "Code", start);
    e.message = element(xml, "Message", start);
    e.request_id = element(xml, "RequestId", start);
    return e;
}

bool parse_content_range(const std::string &value, int64_t &first, int64_t &last, int64_t &total) {
    const std::string prefix = "bytes ";
    if (value.compare(0, prefix.size(), prefix) != 0) return false;
    const char *p = value.c_str() + prefix.size();
    char *end = nullptr;
    first = std::strtoll(p, &end, 10);
    if (end == p || *end != '-') return false;
    p = end + 1;
    last = std::strtoll(p, &end, 10);
    if (end == p || *end != '/') return false;
    p = end + 1;
    if (*p == '*') {
        total = -1;
        return true;
    }
    total = std::strtoll(p, &end, 10);
    return end != p && last >= first;
}

std::string default_error_code(int status, bool bucket_level) {
    switch (status) {
        case 400: return "BadRequest";
        case 403: return "AccessDenied";
        case 404: return bucket_level ? "NoSuchBucket" : "NoSuchKey";
        case 412: return "PreconditionFailed";
        case 416: return "InvalidRange";
        case 429: return "TooManyRequests";
        case 500: return "InternalError";
        case 503: return "ServiceUnavailable";
        default: return "HTTP" + std::to_string(status);
    }
}

bool is_throttle(int status, const std::string &code) {
    if (status == 429) return true;
    return code == "SlowDown" || code == "Throttling" || code == "ThrottlingException" ||
           code == "ThrottledException" || code == "RequestThrottledException" ||
           code == "TooManyRequestsException" || code == "RequestLimitExceeded" ||
           code == "BandwidthLimitExceeded" || code == "RequestThrottled" ||
           code == "LimitExceededException" || code == "ProvisionedThroughputExceededException";
}

bool is_retryable_status(int status, const std::string &code) {
    if (status >= 500 || status == 429) return true;
    return code == "SlowDown" || code == "RequestTimeout" || code == "InternalError" ||
           code == "ServiceUnavailable" || code == "Throttling";
}

}  // namespace nl
