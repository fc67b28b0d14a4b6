// The engine's construction and close, and the tickets as callers see them: see engine.hpp.
#include "engine.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <unistd.h>

namespace nl {

namespace {

constexpr int64_t MAX_OBJECT_BYTES = int64_t{5} << 40;  // S3's largest object: 5 TiB

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
            t->outcome.error_kind = ErrorKind::Closed;
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
        if (ticket.kind != RequestKind::Get) {
            add_part(ticket, 0, 0, true);
        } else if (size_hint > ticket.offset) {
            // The layout is known up front: queue every part now. The result is allocated when
            // its first part starts (start_part), so tickets queued far ahead hold no memory.
            int64_t end = ticket.length < 0 ? size_hint
                                            : std::min(ticket.offset + ticket.length, size_hint);
            ticket.result_len = end - ticket.offset;
            ticket.layout_known = true;
            ticket.outcome.object_size = size_hint;
            for (int64_t s = ticket.offset; s < end; s += ticket.part_size)
                add_part(ticket, s, std::min(ticket.part_size, end - s), s == ticket.offset);
        } else {
            int64_t len = ticket.length < 0 ? ticket.part_size
                                            : std::min(ticket.length, ticket.part_size);
            add_part(ticket, ticket.offset, len, true);
        }
        stats_.open_tickets = static_cast<int64_t>(tickets_.size());
        wake_engine();
    }
    return id;
}

uint64_t Engine::submit_get(const std::string &bucket, const std::string &key, int64_t offset,
                            int64_t length, int64_t size_hint, int64_t part_size) {
    if (offset < 0) throw std::invalid_argument("offset must be >= 0");
    if (part_size < 0) throw std::invalid_argument("part_size must be >= 0");
    // A size no object can have would otherwise queue billions of parts before failing.
    if (size_hint > MAX_OBJECT_BYTES)
        throw std::invalid_argument("object size " + std::to_string(size_hint) +
                                    " exceeds S3's 5 TiB maximum");
    auto t = std::make_unique<Ticket>();
    t->kind = RequestKind::Get;
    t->bucket = bucket;
    t->key = key;
    t->offset = offset;
    t->length = length;
    t->part_size = part_size > 0 ? part_size : config_.part_size;
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
    t->kind = RequestKind::Head;
    t->bucket = bucket;
    t->key = key;
    return submit(std::move(t));
}

uint64_t Engine::submit_list(const std::string &bucket, const std::string &prefix,
                             const std::string &delimiter, const std::string &token,
                             int max_keys) {
    auto t = std::make_unique<Ticket>();
    t->kind = RequestKind::List;
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

Progress Engine::wait_readable(uint64_t id, int64_t min_bytes, double timeout_s) {
    std::unique_lock<std::mutex> lk(mu_);
    auto find = [&]() -> Ticket * {
        auto it = tickets_.find(id);
        return it == tickets_.end() ? nullptr : it->second.get();
    };
    auto ready = [&] {
        Ticket *t = find();
        return t == nullptr || t->complete ||
               t->readable.load(std::memory_order_acquire) >= min_bytes;
    };
    if (find() == nullptr) throw std::out_of_range("unknown ticket");
    if (!ready()) {
        WaitMark mark(*this, id);
        find()->wanted = min_bytes;
        watched_.insert(id);
        done_cv_->wait_for(lk, std::chrono::duration<double>(std::max(0.0, timeout_s)), ready);
        watched_.erase(id);
    }
    Progress out;
    Ticket *t = find();
    if (t == nullptr) {  // cancelled meanwhile by another thread
        out.complete = true;
        return out;
    }
    t->wanted = 0;
    out.data = t->outcome.data;
    out.readable = t->readable.load(std::memory_order_acquire);
    out.complete = t->complete;
    out.object_size = t->outcome.object_size;
    out.etag = t->outcome.etag;
    return out;
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

void Engine::share_rate_limiter(void *memory) {
    std::lock_guard<std::mutex> lk(mu_);
    shared_limiter_ = SharedRateLimiter::attach(memory);
}

EngineStats Engine::stats() {
    std::lock_guard<std::mutex> lk(mu_);
    EngineStats s = stats_;
    s.send_rate_limit = static_cast<int64_t>(std::lround(limiter()->rate()));
    return s;
}

void Engine::wake_engine() {
    // One wakeup per poll: each is a write to curl's socketpair and another round of the loop,
    // and a busy consumer submits thousands of tickets a second. Outside poll the engine thread
    // runs admission before it polls again, so it needs none.
    if (!polling_ || woken_) return;
    woken_ = true;
    curl_multi_wakeup(multi_);
}

}  // namespace nl
