// Classifying how an attempt ended: see classify.hpp.
#include "classify.hpp"

#include <cstdlib>
#include <utility>

namespace nl {

namespace {

bool is_success(int status) { return status >= 200 && status < 300; }

Failure curl_failure(CURLcode code, const char *curl_error) {
    std::string detail = curl_error[0] ? std::string(curl_error) : curl_easy_strerror(code);
    switch (code) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
            return Failure{ErrorKind::Connect, 0, "", detail, "", true};
        case CURLE_OPERATION_TIMEDOUT:
            return Failure{ErrorKind::Timeout, 0, "", detail, "", true};
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
            return Failure{ErrorKind::Network, 0, "", detail, "", true};
        default:
            return Failure{ErrorKind::Network, 0, "", detail, "", false};
    }
}

Failure http_failure(const AttemptReport &r) {
    S3ErrorBody body = parse_error_body(r.body);
    Failure f;
    f.kind = ErrorKind::Http;
    f.status = r.status;
    f.code = body.code.empty() ? default_error_code(f.status, r.kind == RequestKind::List)
                               : body.code;
    f.message = body.message;
    f.request_id = body.request_id.empty() ? header_value(r.headers, "x-amz-request-id")
                                           : body.request_id;
    f.retryable = is_retryable_status(f.status, f.code);
    f.throttled = is_throttle(f.status, f.code);
    return f;
}

Classified failed(Failure f) {
    Classified c;
    c.failure = std::move(f);
    return c;
}

Classified done(Verdict v) {
    Classified c;
    c.verdict = v;
    return c;
}

}  // namespace

Classified classify_attempt(const AttemptReport &r) {
    if (r.abort_kind != ErrorKind::None)
        return failed(Failure{r.abort_kind, r.status, "", r.abort_message, "",
                              r.abort_kind == ErrorKind::Timeout});
    if (r.curl_code != CURLE_OK) return failed(curl_failure(r.curl_code, r.curl_error));
    bool get = r.kind == RequestKind::Get;
    if (get && is_success(r.status)) {
        if (!r.writing)
            return failed(Failure{ErrorKind::Protocol, r.status, "", "response had no usable body",
                                  "", false});
        if (r.copied != r.expected)
            return failed(Failure{ErrorKind::Network, r.status, "",
                                  "truncated body: got " + std::to_string(r.copied) + " of " +
                                      std::to_string(r.expected) + " bytes",
                                  "", true});
        return done(Verdict::PartDone);
    }
    if (get && r.status == 416 && r.first_part && r.offset == 0 && !r.layout_known) {
        // A range request on an empty object: the object exists and has no bytes.
        Classified c = done(Verdict::EmptyObject);
        c.etag = header_value(r.headers, "etag");
        return c;
    }
    if (get && r.status == 416 && r.layout_known) {
        // The range came from a size we were told (listing, first part): the object shrank.
        return failed(Failure{ErrorKind::Protocol, 416, "",
                              "the object changed: it is shorter than the " +
                                  std::to_string(r.object_size) + " bytes expected",
                              "", false});
    }
    if (r.kind == RequestKind::Head && is_success(r.status)) {
        Classified c = done(Verdict::HeadDone);
        std::string len = header_value(r.headers, "content-length");
        c.object_size = len.empty() ? -1 : std::strtoll(len.c_str(), nullptr, 10);
        c.etag = header_value(r.headers, "etag");
        return c;
    }
    if (r.kind == RequestKind::List && is_success(r.status)) {
        std::string len = header_value(r.headers, "content-length");
        int64_t expected = len.empty() ? -1 : std::strtoll(len.c_str(), nullptr, 10);
        if (expected >= 0 && expected != static_cast<int64_t>(r.body.size()))
            return failed(Failure{ErrorKind::Network, r.status, "",
                                  "the page was cut short: got " + std::to_string(r.body.size()) +
                                      " of its " + std::to_string(expected) + " bytes",
                                  "", true});
        Classified c = done(Verdict::ListDone);
        std::string error;
        switch (parse_list_page(r.body, c.list, error)) {
            case ListParse::Ok:
                return c;
            case ListParse::CutShort:  // a broken transfer, as a short GET body is
                return failed(Failure{ErrorKind::Network, r.status, "", error, "", true});
            case ListParse::NoToken:  // another answer may be whole
                return failed(Failure{ErrorKind::Protocol, r.status, "", error, "", true});
            case ListParse::Invalid:
                break;
        }
        return failed(Failure{ErrorKind::Protocol, r.status, "", error, "", false});
    }
    return failed(http_failure(r));
}

}  // namespace nl
