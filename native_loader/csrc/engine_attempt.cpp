// One attempt of one part: starting its request, the header and body callbacks, and applying
// how it ended. See engine.hpp; the request is built by request.hpp, the ending classified by
// classify.hpp.
#include "engine.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "classify.hpp"

namespace nl {

namespace {

constexpr size_t MAX_ERROR_BODY = 64 << 10;
constexpr size_t MAX_LIST_BODY = 64 << 20;

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

std::string trim(const std::string &s) {
    size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

}  // namespace

void Engine::start_part(Ticket &t, Part &p) {
    if (t.kind == RequestKind::Get && t.layout_known && !t.outcome.data) {
        try {
            t.outcome.data = std::make_shared<Storage>(static_cast<size_t>(t.result_len));
        } catch (const std::bad_alloc &) {  // not retried: the memory will not appear
            fail(t, p, Failure{ErrorKind::Memory, 0, "",
                               "cannot allocate " + std::to_string(t.result_len) + " bytes", "",
                               false});
            return;
        }
    }
    p.attempts += 1;
    t.attempts = std::max(t.attempts, p.attempts);
    p.status = 0;
    p.response_headers.clear();
    p.got_first_byte = false;
    p.writing = false;
    p.stream_pos = 0;
    p.copied = 0;
    p.received = 0;
    p.body.clear();
    p.abort_kind = ErrorKind::None;
    p.abort_message.clear();
    p.errbuf[0] = '\0';
    p.started = p.last_progress = Clock::now();

    RequestInput in{t.kind, t.bucket, t.key, t.query, p.start, p.len, p.first, t.outcome.etag};
    HttpRequest req = build_request(in, config_, endpoint_, creds_,
                                    config_.unsigned_requests ? std::string() : amz_date_now());
    p.headers = curl_slist_append(nullptr, "Accept:");  // curl's default adds nothing useful
    for (const auto &[name, value] : req.headers)
        p.headers = curl_slist_append(p.headers, (name + ": " + value).c_str());

    CURL *e = nullptr;
    if (!idle_easy_.empty()) {
        e = idle_easy_.back();  // every option used below is set again for this request
        idle_easy_.pop_back();
    } else {
        e = curl_easy_init();
    }
    if (e == nullptr) {
        fail(t, p, Failure{ErrorKind::Network, 0, "", "curl_easy_init failed", "", false});
        return;
    }
    p.easy = e;
    curl_easy_setopt(e, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, p.headers);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, req.connect_timeout_ms);
    // A backstop: the engine's own checks abort first-byte and stall timeouts more precisely.
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, req.low_speed_time_s);
    if (!config_.ca_bundle.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, config_.ca_bundle.c_str());
    // 64 KiB receive buffers: the kernel's copy into them and ours out of them stay in the L2
    // cache; larger ones spill it, smaller ones multiply the callbacks.
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 64L << 10);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, p.errbuf);
    curl_easy_setopt(e, CURLOPT_PRIVATE, &p);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Engine::header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &p);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Engine::write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &p);
    curl_easy_setopt(e, CURLOPT_NOBODY, req.nobody ? 1L : 0L);  // 0: GET again
    p.state = PartState::Active;
    active_[e] = &p;
    stats_.requests += 1;
    stats_.active_requests = static_cast<int64_t>(active_.size());
    stats_.peak_active_requests = std::max(stats_.peak_active_requests, stats_.active_requests);
    curl_multi_add_handle(multi_, e);
}

void Engine::on_done(Ticket &t, Part &p, CURLcode rc) {
    long status = 0;
    long new_connections = 0;
    if (p.easy != nullptr) {
        curl_easy_getinfo(p.easy, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(p.easy, CURLINFO_NUM_CONNECTS, &new_connections);
    }
    stats_.connections += new_connections;
    detach(p);
    if (t.cancelled || t.complete) return;  // nothing left to deliver to
    stats_.bytes_received += p.received;

    AttemptReport report{t.kind,
                         rc,
                         p.errbuf,
                         static_cast<int>(status),
                         p.abort_kind,
                         p.abort_message,
                         p.writing,
                         p.copied,
                         p.window_end - p.window_begin,
                         p.first,
                         t.offset,
                         t.layout_known,
                         t.outcome.object_size,
                         p.response_headers,
                         p.body};
    Classified c = classify_attempt(report);
    if (c.verdict != Verdict::Failed && config_.adaptive_rate) limiter()->on_success(Clock::now());
    switch (c.verdict) {
        case Verdict::Failed:
            fail(t, p, std::move(c.failure));
            return;
        case Verdict::PartDone:
            break;
        case Verdict::EmptyObject:
            t.layout_known = true;
            t.result_len = 0;
            t.outcome.object_size = 0;
            t.outcome.data = std::make_shared<Storage>(0);
            t.outcome.etag = std::move(c.etag);
            charge(t, p, 0);
            break;
        case Verdict::HeadDone:
            t.outcome.object_size = c.object_size;
            t.outcome.etag = std::move(c.etag);
            break;
        case Verdict::ListDone:
            t.outcome.list = std::move(c.list);
            break;
    }
    finish_part(t, p);
}

// Called when the response headers of a successful GET attempt are complete: decides where the
// body goes. The first part learns the object's size, allocates the result and queues the
// remaining parts.
bool Engine::prepare_get(Ticket &t, Part &p) {
    int64_t first = 0, last = -1, total = -1;
    std::string content_range = header_value(p.response_headers, "content-range");
    if (p.status == 206) {
        if (!parse_content_range(content_range, first, last, total) || total < 0) {
            p.abort_kind = ErrorKind::Protocol;
            p.abort_message = "unusable Content-Range in a 206 response";
            return false;
        }
    } else {
        std::string len = header_value(p.response_headers, "content-length");
        if (len.empty()) {
            p.abort_kind = ErrorKind::Protocol;
            p.abort_message = "200 response without Content-Length";
            return false;
        }
        total = std::strtoll(len.c_str(), nullptr, 10);
        first = 0;
        last = total - 1;
    }
    std::string etag = header_value(p.response_headers, "etag");
    if (!t.layout_known) {
        int64_t end = t.length < 0 ? total : std::min(t.offset + t.length, total);
        end = std::max(end, t.offset);
        t.result_len = end - t.offset;
        t.outcome.object_size = total;
        t.outcome.etag = etag;
        try {
            t.outcome.data = std::make_shared<Storage>(static_cast<size_t>(t.result_len));
        } catch (const std::bad_alloc &) {  // must not unwind through curl
            p.abort_kind = ErrorKind::Memory;
            p.abort_message = "cannot allocate " + std::to_string(t.result_len) + " bytes";
            return false;
        }
        t.layout_known = true;
        int64_t covered = std::min(end, last + 1);
        charge(t, p, std::max<int64_t>(0, covered - t.offset));
        for (int64_t s = covered; s < end; s += t.part_size)
            add_part(t, s, std::min(t.part_size, end - s), false);
    } else if (total != t.outcome.object_size) {
        p.abort_kind = ErrorKind::Protocol;
        p.abort_message = "the object changed: its size is " + std::to_string(total) +
                          " bytes, not the " + std::to_string(t.outcome.object_size) +
                          " expected";
        return false;
    } else if (t.outcome.etag.empty()) {
        t.outcome.etag = etag;
    } else if (!etag.empty() && etag != t.outcome.etag) {
        p.abort_kind = ErrorKind::Protocol;
        p.abort_message = "the object changed while it was read (ETag differs)";
        return false;
    }
    if (first > p.start) {
        p.abort_kind = ErrorKind::Protocol;
        p.abort_message = "response starts after the requested range";
        return false;
    }
    int64_t result_end = t.offset + t.result_len;
    p.window_begin = std::min(p.start, result_end);
    p.window_end = p.first ? std::min(result_end, std::max(p.window_begin, last + 1))
                           : std::min(result_end, p.start + p.len);
    p.stream_pos = first;
    p.writing = true;
    return true;
}

size_t Engine::header_cb(char *data, size_t size, size_t n, void *user) {
    Part &p = *static_cast<Part *>(user);
    size_t bytes = size * n;
    std::string line(data, bytes);
    p.last_progress = Clock::now();
    if (line.compare(0, 5, "HTTP/") == 0) {
        p.got_first_byte = true;
        p.response_headers.clear();
        size_t sp = line.find(' ');
        p.status = sp == std::string::npos ? 0 : std::atoi(line.c_str() + sp + 1);
        return bytes;
    }
    std::string trimmed = trim(line);
    if (trimmed.empty()) {
        if (p.status >= 100 && p.status < 200) return bytes;
        Engine &e = *p.engine;
        std::lock_guard<std::mutex> lk(e.mu_);  // the layout and the queue are shared
        Ticket &t = *p.owner;
        if (t.first_byte_s < 0) t.first_byte_s = seconds_since(t.created, p.last_progress);
        if (t.kind == RequestKind::Get && p.status >= 200 && p.status < 300 && !e.prepare_get(t, p))
            return 0;
        return bytes;
    }
    size_t colon = trimmed.find(':');
    if (colon != std::string::npos)
        p.response_headers[lower(trim(trimmed.substr(0, colon)))] = trim(trimmed.substr(colon + 1));
    return bytes;
}

size_t Engine::write_cb(char *data, size_t size, size_t n, void *user) {
    Part &p = *static_cast<Part *>(user);
    size_t bytes = size * n;
    p.last_progress = Clock::now();
    p.received += static_cast<int64_t>(bytes);
    if (!p.writing) {
        bool listing = p.owner->kind == RequestKind::List && p.status >= 200 && p.status < 300;
        size_t cap = listing ? MAX_LIST_BODY : MAX_ERROR_BODY;
        if (p.body.size() + bytes > cap) {
            if (listing) {
                p.abort_kind = ErrorKind::Protocol;
                p.abort_message = "listing response too large";
                return 0;
            }
            p.body.append(data, cap - std::min(cap, p.body.size()));
            return bytes;
        }
        p.body.append(data, bytes);
        return bytes;
    }
    Ticket &t = *p.owner;
    if (!t.outcome.data) return 0;
    int64_t begin = p.stream_pos;
    int64_t end = begin + static_cast<int64_t>(bytes);
    p.stream_pos = end;
    int64_t lo = std::max(begin, p.window_begin);
    int64_t hi = std::min(end, p.window_end);
    if (hi > lo) {
        // The part that starts the result writes it from its start, in order: what it wrote
        // is readable (Progress). A retry does not write those bytes again (they are the same
        // object's, its ETag checked), as a caller may be reading them.
        bool prefix = p.start == t.offset;
        int64_t readable = prefix ? t.readable.load(std::memory_order_relaxed) : 0;
        int64_t from = std::max(lo, t.offset + readable);
        if (hi > from)
            std::memcpy(t.outcome.data->data + (from - t.offset), data + (from - begin),
                        static_cast<size_t>(hi - from));
        p.copied += hi - lo;
        if (prefix && hi - t.offset > readable)
            t.readable.store(hi - t.offset, std::memory_order_release);
    }
    if (end > p.window_end && p.status == 206 && !p.first) {
        p.abort_kind = ErrorKind::Protocol;
        p.abort_message = "response is longer than the requested range";
        return 0;
    }
    return bytes;
}

}  // namespace nl
