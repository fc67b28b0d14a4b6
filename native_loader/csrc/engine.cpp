// The transfer engine: see engine.hpp.
#include "engine.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <unistd.h>

namespace nl {

namespace {

constexpr size_t MAX_ERROR_BODY = 64 << 10;
constexpr size_t MAX_LIST_BODY = 64 << 20;
constexpr int IDLE_POLL_MS = 100;
constexpr int64_t MAX_OBJECT_BYTES = int64_t{5} << 40;  // S3's largest object: 5 TiB

double seconds_since(Clock::time_point t, Clock::time_point now) {
    return std::chrono::duration<double>(now - t).count();
}

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

std::string header(const std::map<std::string, std::string> &h, const std::string &name) {
    auto it = h.find(name);
    return it == h.end() ? "" : it->second;
}

struct CurlGlobal {
    CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

}  // namespace

Engine::Engine(EngineConfig config)
    : config_(std::move(config)),
      done_cv_(std::make_unique<std::condition_variable>()),
      owner_pid_(::getpid()),
      rng_(std::random_device{}()) {
    static CurlGlobal global;
    if (!split_url(config_.endpoint, endpoint_))
        throw std::invalid_argument("endpoint must be an http:// or https:// URL");
    if (config_.max_inflight_requests < 1 || config_.part_size < 1 || config_.max_attempts < 1)
        throw std::invalid_argument("invalid engine limits");
    multi_ = curl_multi_init();
    if (multi_ == nullptr) throw std::runtime_error("curl_multi_init failed");
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(config_.max_inflight_requests));
    thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
    if (::getpid() != owner_pid_) {
        // A forked child: the engine thread does not exist here, and the parent's lock or
        // condition variable may have been mid-use at fork time. Leak them, and never touch
        // curl (closing its connections could disturb the parent's TLS sessions).
        new std::thread(std::move(thread_));  // never joined, never destroyed
        (void)done_cv_.release();
        return;
    }
    close();
}

void Engine::close() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (closed_) return;
        closed_ = true;
        stop_ = true;
        curl_multi_wakeup(multi_);
    }
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<Part *> running;
    for (auto &[easy, part] : active_) running.push_back(part);
    for (Part *part : running) detach(*part);
    for (auto &[id, t] : tickets_) {
        if (!t->complete) {
            t->outcome.error_kind = "closed";
            t->outcome.message = "the reader was closed";
            t->complete = true;
        }
    }
    for (CURL *e : idle_easy_) curl_easy_cleanup(e);
    idle_easy_.clear();
    curl_multi_cleanup(multi_);
    multi_ = nullptr;
    done_cv_->notify_all();
}

void Engine::set_credentials(const SigningCredentials &creds) {
    std::lock_guard<std::mutex> lk(mu_);
    creds_ = creds;
}

void Engine::add_part(Ticket &t, int64_t start, int64_t len, bool first) {
    auto part = std::make_unique<Part>();
    part->ticket = t.id;
    part->owner = &t;
    part->index = t.parts.size();
    part->first = first;
    part->start = start;
    part->len = len;
    part->charge = len;
    part->engine = this;
    ready_.emplace(t.id, part->index);
    t.parts.push_back(std::move(part));
    t.parts_pending += 1;
}

uint64_t Engine::submit(std::unique_ptr<Ticket> t, int64_t size_hint) {
    uint64_t id;
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (closed_) throw std::runtime_error("the reader is closed");
        id = next_id_++;
        t->id = id;
        t->created = Clock::now();
        Ticket &ticket = *t;
        tickets_.emplace(id, std::move(t));
        if (ticket.kind != Kind::Get) {
            add_part(ticket, 0, 0, true);
        } else if (size_hint > ticket.offset) {
            // The layout is known up front: queue every part now. The result is allocated when
            // its first part starts (start_part), so tickets queued far ahead hold no memory.
            int64_t end = ticket.length < 0 ? size_hint
                                            : std::min(ticket.offset + ticket.length, size_hint);
            ticket.result_len = end - ticket.offset;
            ticket.layout_known = true;
            ticket.outcome.object_size = size_hint;
            for (int64_t s = ticket.offset; s < end; s += config_.part_size)
                add_part(ticket, s, std::min(config_.part_size, end - s), s == ticket.offset);
        } else {
            int64_t len = ticket.length < 0 ? config_.part_size
                                            : std::min(ticket.length, config_.part_size);
            add_part(ticket, ticket.offset, len, true);
        }
        stats_.open_tickets = static_cast<int64_t>(tickets_.size());
        wake_engine();
    }
    return id;
}

uint64_t Engine::submit_get(const std::string &bucket, const std::string &key, int64_t offset,
                            int64_t length, int64_t size_hint) {
    if (offset < 0) throw std::invalid_argument("offset must be >= 0");
    // A size no object can have would otherwise queue billions of parts before failing.
    if (size_hint > MAX_OBJECT_BYTES)
        throw std::invalid_argument("object size " + std::to_string(size_hint) +
                                    " exceeds S3's 5 TiB maximum");
    auto t = std::make_unique<Ticket>();
    t->kind = Kind::Get;
    t->bucket = bucket;
    t->key = key;
    t->offset = offset;
    t->length = length;
    if (length == 0) {  // nothing to fetch: complete at once
        std::lock_guard<std::mutex> lk(mu_);
        if (closed_) throw std::runtime_error("the reader is closed");
        uint64_t id = next_id_++;
        t->id = id;
        t->complete = true;
        t->outcome.data = std::make_shared<Storage>(0);
        tickets_.emplace(id, std::move(t));
        return id;
    }
    return submit(std::move(t), size_hint);
}

uint64_t Engine::submit_head(const std::string &bucket, const std::string &key) {
    auto t = std::make_unique<Ticket>();
    t->kind = Kind::Head;
    t->bucket = bucket;
    t->key = key;
    return submit(std::move(t));
}

uint64_t Engine::submit_list(const std::string &bucket, const std::string &prefix,
                             const std::string &delimiter, const std::string &token,
                             int max_keys) {
    auto t = std::make_unique<Ticket>();
    t->kind = Kind::List;
    t->bucket = bucket;
    t->query.emplace_back("list-type", "2");
    // Keys come back URL-encoded (decoded in parse_list_page): XML 1.0 cannot carry every
    // character a key may hold.
    t->query.emplace_back("encoding-type", "url");
    if (!prefix.empty()) t->query.emplace_back("prefix", prefix);
    if (!delimiter.empty()) t->query.emplace_back("delimiter", delimiter);
    if (!token.empty()) t->query.emplace_back("continuation-token", token);
    if (max_keys > 0) t->query.emplace_back("max-keys", std::to_string(max_keys));
    return submit(std::move(t));
}

bool Engine::wait(uint64_t id, double timeout_s) {
    std::unique_lock<std::mutex> lk(mu_);
    auto ready = [&] {
        auto it = tickets_.find(id);
        return it == tickets_.end() || it->second->complete;
    };
    if (ready()) return true;
    WaitMark mark(*this, id);
    return done_cv_->wait_for(lk, std::chrono::duration<double>(std::max(0.0, timeout_s)), ready);
}

Engine::WaitMark::WaitMark(Engine &e, uint64_t id) : engine(e), ticket(id) {
    engine.waited_[ticket] += 1;
    if (!engine.closed_ && !engine.ready_.empty()) engine.wake_engine();  // it is exempt now
}

Engine::WaitMark::~WaitMark() {
    auto it = engine.waited_.find(ticket);
    if (it != engine.waited_.end() && --it->second == 0) engine.waited_.erase(it);
}

std::vector<uint64_t> Engine::wait_any(const std::vector<uint64_t> &ids, double timeout_s) {
    std::unique_lock<std::mutex> lk(mu_);
    std::vector<uint64_t> done;
    auto ready = [&] {
        done.clear();
        for (uint64_t id : ids) {
            auto it = tickets_.find(id);
            if (it == tickets_.end() || it->second->complete) done.push_back(id);
        }
        return !done.empty();
    };
    if (ready() || ids.empty()) return done;
    WaitMark mark(*this, *std::min_element(ids.begin(), ids.end()));
    done_cv_->wait_for(lk, std::chrono::duration<double>(std::max(0.0, timeout_s)), ready);
    return done;
}

Outcome Engine::take(uint64_t id) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = tickets_.find(id);
    if (it == tickets_.end()) throw std::out_of_range("unknown ticket");
    Ticket &t = *it->second;
    if (!t.complete) throw std::logic_error("ticket is not finished");
    Outcome out = std::move(t.outcome);
    release(t);
    tickets_.erase(it);
    stats_.open_tickets = static_cast<int64_t>(tickets_.size());
    return out;
}

void Engine::cancel(uint64_t id) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = tickets_.find(id);
        if (it == tickets_.end()) return;
        Ticket &t = *it->second;
        bool running = false;
        for (auto &p : t.parts) {
            if (p->state == PartState::Queued) ready_.erase({id, p->index});
            if (p->state == PartState::Active) running = true;
            if (p->state != PartState::Active) p->state = PartState::Done;
        }
        if (!running || closed_) {
            release(t);
            tickets_.erase(it);
            stats_.open_tickets = static_cast<int64_t>(tickets_.size());
            return;
        }
        t.cancelled = true;
        cancelled_.push_back(id);
        wake_engine();
    }
}

EngineStats Engine::stats() {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
}

void Engine::wake_engine() {
    // One wakeup per poll: each is a write to curl's socketpair and another round of the loop,
    // and a busy consumer submits thousands of tickets a second. Outside poll the engine thread
    // runs admission before it polls again, so it needs none.
    if (!polling_ || woken_) return;
    woken_ = true;
    curl_multi_wakeup(multi_);
}

// ---------------------------------------------------------------------------------------------
// Engine thread.

void Engine::run() {
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_) {
        Clock::time_point now = Clock::now();
        reap_cancelled();
        promote_retries(now);
        check_timeouts(now);
        admit();
        int running = 0;
        lk.unlock();
        curl_multi_perform(multi_, &running);  // callbacks lock only where they must
        lk.lock();
        drain_messages();
        admit();
        int timeout_ms = poll_timeout_ms(Clock::now());
        bool wake = std::exchange(notify_, false);
        polling_ = true;
        lk.unlock();
        if (wake) done_cv_->notify_all();  // once per round, not once per finished ticket
        curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
        lk.lock();
        polling_ = false;
        woken_ = false;
    }
}

int Engine::poll_timeout_ms(Clock::time_point now) const {
    int timeout = IDLE_POLL_MS;
    if (!active_.empty()) timeout = 20;  // timeouts are checked between polls
    for (const auto &[tid, idx] : waiting_) {
        auto it = tickets_.find(tid);
        if (it == tickets_.end()) continue;
        const Part &p = *it->second->parts[idx];
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(p.retry_at - now).count();
        timeout = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(timeout, ms + 1)));
    }
    return timeout;
}

uint64_t Engine::head_ticket() const {
    for (const auto &[id, t] : tickets_) {
        if (t->cancelled) continue;
        return t->complete ? 0 : id;  // a finished, uncollected result holds the budget
    }
    return 0;
}

void Engine::charge(Ticket &t, Part &p, int64_t bytes) {
    int64_t delta = bytes - p.charge;
    p.charge = bytes;
    t.charge += delta;
    stats_.inflight_bytes += delta;
    stats_.peak_inflight_bytes = std::max(stats_.peak_inflight_bytes, stats_.inflight_bytes);
}

void Engine::release(Ticket &t) {
    stats_.inflight_bytes -= t.charge;
    t.charge = 0;
    for (auto &p : t.parts) p->charge = 0;
}

void Engine::admit() {
    // Parts start in (ticket, part) order while they fit the byte budget. Once one does not,
    // only exempt tickets may still start: the oldest ticket not yet collected, and tickets a
    // caller is blocked on. Results are collected oldest first (or by whoever waits), so the
    // budget cannot deadlock on results that wait for their turn.
    uint64_t head = head_ticket();
    bool blocked = false;
    for (auto it = ready_.begin();
         it != ready_.end() && static_cast<int>(active_.size()) < config_.max_inflight_requests;) {
        auto [tid, idx] = *it;
        auto tt = tickets_.find(tid);
        if (tt == tickets_.end()) {
            it = ready_.erase(it);
            continue;
        }
        Ticket &t = *tt->second;
        Part &p = *t.parts[idx];
        if (!p.charged) {
            int64_t need = p.charge;
            bool fits = !blocked && stats_.inflight_bytes + need <= config_.max_inflight_bytes;
            bool exempt = stats_.inflight_bytes == 0 || tid == head || waited_.count(tid) > 0;
            if (!fits && !exempt) {
                blocked = true;
                ++it;
                continue;
            }
            p.charge = 0;
            charge(t, p, need);
            p.charged = true;
        }
        it = ready_.erase(it);
        start_part(t, p);
        // A start that failed the ticket (no memory, no curl handle) removed its queued parts
        // from ready_, which may include the one `it` points to.
        if (t.complete) it = ready_.begin();
    }
}

void Engine::start_part(Ticket &t, Part &p) {
    if (t.kind == Kind::Get && t.layout_known && !t.outcome.data) {
        try {
            t.outcome.data = std::make_shared<Storage>(static_cast<size_t>(t.result_len));
        } catch (const std::bad_alloc &) {  // not retried: the memory will not appear
            fail(t, p, Failure{"memory", 0, "", "cannot allocate " +
                                                std::to_string(t.result_len) + " bytes", "",
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
    p.abort_kind.clear();
    p.abort_message.clear();
    p.errbuf[0] = '\0';
    p.started = p.last_progress = Clock::now();

    std::string method = t.kind == Kind::Head ? "HEAD" : "GET";
    // Virtual hosting needs a DNS label: dots (TLS wildcards), upper case or '_' force path style.
    bool dns_label = !t.bucket.empty() && std::all_of(t.bucket.begin(), t.bucket.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    });
    bool path_style = config_.path_style || !dns_label;
    RequestTarget target = make_target(endpoint_, path_style, t.bucket,
                                       t.kind == Kind::List ? "" : t.key, t.query);
    Headers headers;
    if (t.kind == Kind::Get) {
        headers.emplace_back("range", "bytes=" + std::to_string(p.start) + "-" +
                                          std::to_string(p.start + p.len - 1));
        if (!p.first && !t.outcome.etag.empty()) headers.emplace_back("if-match", t.outcome.etag);
    }
    if (!config_.unsigned_requests) {
        SignInput in;
        in.method = method;
        in.canonical_uri = target.canonical_uri;
        in.raw_query = target.raw_query;
        in.host = target.host;
        in.headers = headers;
        in.payload_hash = UNSIGNED_PAYLOAD;
        in.amz_date = amz_date_now();
        in.region = config_.region;
        in.service = "s3";
        for (auto &h : sigv4_sign(in, creds_)) headers.push_back(std::move(h));
    }
    p.headers = curl_slist_append(nullptr, "Accept:");  // curl's default adds nothing useful
    for (const auto &[name, value] : headers)
        p.headers = curl_slist_append(p.headers, (name + ": " + value).c_str());

    CURL *e = nullptr;
    if (!idle_easy_.empty()) {
        e = idle_easy_.back();  // every option used below is set again for this request
        idle_easy_.pop_back();
    } else {
        e = curl_easy_init();
    }
    if (e == nullptr) {
        fail(t, p, Failure{"network", 0, "", "curl_easy_init failed", "", false});
        return;
    }
    p.easy = e;
    curl_easy_setopt(e, CURLOPT_URL, target.url.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, p.headers);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::ceil(config_.connect_timeout_s * 1000)));
    // A backstop: the engine's own checks abort first-byte and stall timeouts more precisely.
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
                     static_cast<long>(std::ceil(std::max(config_.first_byte_timeout_s,
                                                          config_.stall_timeout_s) +
                                                 config_.connect_timeout_s + 1)));
    if (!config_.ca_bundle.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, config_.ca_bundle.c_str());
    // 64 KiB receive buffers: the kernel's copy into them and ours out of them stay in the L2
    // cache. 256 KiB spilled it (nginx 64 MiB at 2 in flight: 2,100 -> 2,900 MB/s; 100 KiB
    // objects at 128 in flight: 6.2-7.0k -> 10.5k objects/s); 16 KiB means 4x the callbacks.
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 64L << 10);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, p.errbuf);
    curl_easy_setopt(e, CURLOPT_PRIVATE, &p);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Engine::header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &p);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Engine::write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &p);
    curl_easy_setopt(e, CURLOPT_NOBODY, t.kind == Kind::Head ? 1L : 0L);  // 0: GET again
    p.state = PartState::Active;
    active_[e] = &p;
    stats_.requests += 1;
    stats_.active_requests = static_cast<int64_t>(active_.size());
    stats_.peak_active_requests = std::max(stats_.peak_active_requests, stats_.active_requests);
    curl_multi_add_handle(multi_, e);
}

void Engine::detach(Part &p) {
    if (p.easy != nullptr) {
        if (multi_ != nullptr) curl_multi_remove_handle(multi_, p.easy);
        // Pointers into this part must not outlive it; the next request sets its own.
        curl_easy_setopt(p.easy, CURLOPT_ERRORBUFFER, nullptr);
        curl_easy_setopt(p.easy, CURLOPT_HTTPHEADER, nullptr);
        if (multi_ != nullptr &&
            idle_easy_.size() < static_cast<size_t>(config_.max_inflight_requests)) {
            idle_easy_.push_back(p.easy);
        } else {
            curl_easy_cleanup(p.easy);
        }
        active_.erase(p.easy);
        p.easy = nullptr;
    }
    if (p.headers != nullptr) {
        curl_slist_free_all(p.headers);
        p.headers = nullptr;
    }
    stats_.active_requests = static_cast<int64_t>(active_.size());
}

void Engine::reap_cancelled() {
    for (uint64_t id : cancelled_) {
        auto it = tickets_.find(id);
        if (it == tickets_.end()) continue;
        Ticket &t = *it->second;
        for (auto &p : t.parts) {
            if (p->state == PartState::Active) detach(*p);
            if (p->state == PartState::Queued) ready_.erase({id, p->index});
            p->state = PartState::Done;
        }
        release(t);
        tickets_.erase(it);
    }
    cancelled_.clear();
    stats_.open_tickets = static_cast<int64_t>(tickets_.size());
}

void Engine::promote_retries(Clock::time_point now) {
    auto due = std::partition(waiting_.begin(), waiting_.end(), [&](const auto &key) {
        auto it = tickets_.find(key.first);
        if (it == tickets_.end()) return false;  // dropped below
        return it->second->parts[key.second]->retry_at > now;
    });
    for (auto k = due; k != waiting_.end(); ++k) {
        auto it = tickets_.find(k->first);
        if (it == tickets_.end()) continue;
        Part &p = *it->second->parts[k->second];
        if (p.state != PartState::Waiting) continue;
        p.state = PartState::Queued;
        ready_.insert(*k);
    }
    waiting_.erase(due, waiting_.end());
}

void Engine::check_timeouts(Clock::time_point now) {
    std::vector<Part *> expired;
    for (auto &[easy, p] : active_) {
        if (!p->got_first_byte) {
            curl_off_t pretransfer = 0;
            curl_easy_getinfo(easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer);
            // Still connecting (pretransfer 0): curl's connect timeout applies, and this bound
            // only backs it up.
            double waited = pretransfer > 0
                                ? seconds_since(p->started, now) - pretransfer / 1e6
                                : seconds_since(p->started, now) - config_.connect_timeout_s;
            if (waited > config_.first_byte_timeout_s) {
                p->abort_kind = "timeout";
                p->abort_message = "no response within first_byte_timeout_s";
                expired.push_back(p);
            }
        } else if (seconds_since(p->last_progress, now) > config_.stall_timeout_s) {
            p->abort_kind = "timeout";
            p->abort_message = "transfer stalled for longer than stall_timeout_s";
            expired.push_back(p);
        }
    }
    for (Part *p : expired) {
        // An earlier abort may have failed this part's ticket (and detached the part) already.
        auto it = tickets_.find(p->ticket);
        if (it == tickets_.end() || p->state != PartState::Active) continue;
        on_done(*it->second, *p, CURLE_OPERATION_TIMEDOUT);
    }
}

void Engine::drain_messages() {
    int left = 0;
    bool any = false;
    while (CURLMsg *msg = curl_multi_info_read(multi_, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        auto it = active_.find(msg->easy_handle);
        if (it == active_.end()) continue;
        Part &p = *it->second;
        CURLcode rc = msg->data.result;
        auto tt = tickets_.find(p.ticket);
        if (tt == tickets_.end()) {
            detach(p);
            continue;
        }
        on_done(*tt->second, p, rc);
        any = true;
    }
    (void)any;
}

double Engine::backoff_s(int attempt) {
    double cap = std::min(config_.backoff_max_s,
                          config_.backoff_base_s * std::pow(2.0, std::max(0, attempt - 1)));
    std::uniform_real_distribution<double> jitter(0.5, 1.0);  // "equal jitter"
    return cap * jitter(rng_);
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

    Failure f;
    if (!p.abort_kind.empty()) {
        f = Failure{p.abort_kind, static_cast<int>(status), "", p.abort_message, "",
                    p.abort_kind == "timeout"};
    } else if (rc != CURLE_OK) {
        std::string detail = p.errbuf[0] ? std::string(p.errbuf) : curl_easy_strerror(rc);
        switch (rc) {
            case CURLE_COULDNT_CONNECT:
            case CURLE_COULDNT_RESOLVE_HOST:
            case CURLE_COULDNT_RESOLVE_PROXY:
                f = Failure{"connect", 0, "", detail, "", true};
                break;
            case CURLE_OPERATION_TIMEDOUT:
                f = Failure{"timeout", 0, "", detail, "", true};
                break;
            case CURLE_PARTIAL_FILE:
            case CURLE_RECV_ERROR:
            case CURLE_SEND_ERROR:
            case CURLE_GOT_NOTHING:
            case CURLE_HTTP2:
            case CURLE_HTTP2_STREAM:
                f = Failure{"network", 0, "", detail, "", true};
                break;
            default:
                f = Failure{"network", 0, "", detail, "", false};
        }
    } else if (t.kind == Kind::Get && status >= 200 && status < 300) {
        if (!p.writing) {
            f = Failure{"protocol", static_cast<int>(status), "", "response had no usable body",
                        "", false};
        } else if (p.copied != p.window_end - p.window_begin) {
            f = Failure{"network", static_cast<int>(status), "",
                        "truncated body: got " + std::to_string(p.copied) + " of " +
                            std::to_string(p.window_end - p.window_begin) + " bytes",
                        "", true};
        } else {
            finish_part(t, p);
            return;
        }
    } else if (t.kind == Kind::Get && status == 416 && p.first && t.offset == 0 &&
               !t.layout_known) {
        // A range request on an empty object: the object exists and has no bytes.
        t.layout_known = true;
        t.result_len = 0;
        t.outcome.object_size = 0;
        t.outcome.data = std::make_shared<Storage>(0);
        t.outcome.etag = header(p.response_headers, "etag");
        charge(t, p, 0);
        finish_part(t, p);
        return;
    } else if (t.kind == Kind::Get && status == 416 && t.layout_known) {
        // The range came from a size we were told (listing, first part): the object shrank.
        f = Failure{"protocol", 416, "", "the object changed: it is shorter than the " +
                                             std::to_string(t.outcome.object_size) +
                                             " bytes expected", "", false};
    } else if (t.kind == Kind::Head && status >= 200 && status < 300) {
        std::string len = header(p.response_headers, "content-length");
        t.outcome.object_size = len.empty() ? -1 : std::strtoll(len.c_str(), nullptr, 10);
        t.outcome.etag = header(p.response_headers, "etag");
        finish_part(t, p);
        return;
    } else if (t.kind == Kind::List && status >= 200 && status < 300) {
        std::string error;
        if (!parse_list_page(p.body, t.outcome.list, error)) {
            f = Failure{"protocol", static_cast<int>(status), "", error, "", false};
        } else {
            finish_part(t, p);
            return;
        }
    } else {
        S3ErrorBody body = parse_error_body(p.body);
        f.kind = "http";
        f.status = static_cast<int>(status);
        f.code = body.code.empty() ? default_error_code(f.status, t.kind == Kind::List)
                                   : body.code;
        f.message = body.message;
        f.request_id = body.request_id.empty() ? header(p.response_headers, "x-amz-request-id")
                                               : body.request_id;
        f.retryable = is_retryable_status(f.status, f.code);
    }
    fail(t, p, std::move(f));
}

void Engine::fail(Ticket &t, Part &p, Failure f) {
    if (f.retryable && p.attempts < config_.max_attempts && !stop_) {
        stats_.retries += 1;
        p.state = PartState::Waiting;
        p.retry_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(backoff_s(p.attempts)));
        waiting_.emplace_back(t.id, p.index);
        return;
    }
    p.state = PartState::Done;
    fail_ticket(t, f);
}

void Engine::fail_ticket(Ticket &t, const Failure &f) {
    for (auto &q : t.parts) {
        if (q->state == PartState::Active) detach(*q);
        if (q->state == PartState::Queued) ready_.erase({t.id, q->index});
        q->state = PartState::Done;
    }
    t.outcome.data.reset();
    t.outcome.error_kind = f.kind;
    t.outcome.status = f.status;
    t.outcome.code = f.code;
    t.outcome.message = f.message;
    t.outcome.request_id = f.request_id;
    complete(t);
}

void Engine::finish_part(Ticket &t, Part &p) {
    p.state = PartState::Done;
    t.parts_pending -= 1;
    if (t.parts_pending == 0) complete(t);
}

void Engine::complete(Ticket &t) {
    Clock::time_point now = Clock::now();
    t.complete = true;
    t.outcome.attempts = t.attempts;
    t.outcome.elapsed_s = seconds_since(t.created, now);
    t.outcome.first_byte_s = t.first_byte_s < 0 ? t.outcome.elapsed_s : t.first_byte_s;
    notify_ = true;
}

// Called when the response headers of a successful GET attempt are complete: decides where the
// body goes. The first part learns the object's size, allocates the result and queues the
// remaining parts.
bool Engine::prepare_get(Ticket &t, Part &p) {
    int64_t first = 0, last = -1, total = -1;
    std::string content_range = header(p.response_headers, "content-range");
    if (p.status == 206) {
        if (!parse_content_range(content_range, first, last, total) || total < 0) {
            p.abort_kind = "protocol";
            p.abort_message = "unusable Content-Range in a 206 response";
            return false;
        }
    } else {
        std::string len = header(p.response_headers, "content-length");
        if (len.empty()) {
            p.abort_kind = "protocol";
            p.abort_message = "200 response without Content-Length";
            return false;
        }
        total = std::strtoll(len.c_str(), nullptr, 10);
        first = 0;
        last = total - 1;
    }
    std::string etag = header(p.response_headers, "etag");
    if (!t.layout_known) {
        int64_t end = t.length < 0 ? total : std::min(t.offset + t.length, total);
        end = std::max(end, t.offset);
        t.result_len = end - t.offset;
        t.outcome.object_size = total;
        t.outcome.etag = etag;
        try {
            t.outcome.data = std::make_shared<Storage>(static_cast<size_t>(t.result_len));
        } catch (const std::bad_alloc &) {  // must not unwind through curl
            p.abort_kind = "memory";
            p.abort_message = "cannot allocate " + std::to_string(t.result_len) + " bytes";
            return false;
        }
        t.layout_known = true;
        int64_t covered = std::min(end, last + 1);
        charge(t, p, std::max<int64_t>(0, covered - t.offset));
        for (int64_t s = covered; s < end; s += config_.part_size)
            add_part(t, s, std::min(config_.part_size, end - s), false);
    } else if (total != t.outcome.object_size) {
        p.abort_kind = "protocol";
        p.abort_message = "the object changed: its size is " + std::to_string(total) +
                          " bytes, not the " + std::to_string(t.outcome.object_size) +
                          " expected";
        return false;
    } else if (t.outcome.etag.empty()) {
        t.outcome.etag = etag;
    } else if (!etag.empty() && etag != t.outcome.etag) {
        p.abort_kind = "protocol";
        p.abort_message = "the object changed while it was read (ETag differs)";
        return false;
    }
    if (first > p.start) {
        p.abort_kind = "protocol";
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
        if (t.kind == Kind::Get && p.status >= 200 && p.status < 300 && !e.prepare_get(t, p))
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
        bool listing = p.owner->kind == Kind::List && p.status >= 200 && p.status < 300;
        size_t cap = listing ? MAX_LIST_BODY : MAX_ERROR_BODY;
        if (p.body.size() + bytes > cap) {
            if (listing) {
                p.abort_kind = "protocol";
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
        std::memcpy(t.outcome.data->data + (lo - t.offset), data + (lo - begin),
                    static_cast<size_t>(hi - lo));
        p.copied += hi - lo;
    }
    if (end > p.window_end && p.status == 206 && !p.first) {
        p.abort_kind = "protocol";
        p.abort_message = "response is longer than the requested range";
        return 0;
    }
    return bytes;
}

}  // namespace nl
