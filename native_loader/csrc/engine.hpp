// The transfer engine: one background thread driving a libcurl multi handle (connections are
// kept alive and reused), a priority queue of part requests admitted under request and byte
// budgets, per-part retries with capped exponential backoff and jitter, an adaptive send-rate
// limiter that slows down when the endpoint throttles (rate_limiter.hpp), and timeouts.
//
// Threads: callers submit tickets and wait for them (without the GIL); only the engine thread
// touches curl. Every piece of shared state is guarded by one mutex, which the engine thread
// does not hold while curl moves bytes: the body callbacks touch only their own part and its
// ticket's result storage and readable count (an atomic; none can go away while the part is
// active), and take the lock for the rest, so callers collect results and submit while
// transfers run, and read a result's first bytes while the rest arrives (wait_readable).
//
// One class, implemented along its seams:
//   engine.cpp            construction, close, and the tickets as callers see them (submit,
//                         wait, take, cancel)
//   engine_scheduler.cpp  the part scheduler: admission under the budgets, retries and
//                         backoff, cancellation, completion of tickets
//   engine_loop.cpp       the curl loop: perform, poll, finished transfers, timeouts
//   engine_attempt.cpp    the request lifecycle of one attempt of one part: start, header
//                         and body callbacks, applying how it ended
// and two pure pieces, testable without curl: request.hpp (building a request) and
// classify.hpp (how an attempt ended).
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine_types.hpp"
#include "rate_limiter.hpp"
#include "request.hpp"
#include "sigv4.hpp"
#include "url.hpp"

namespace nl {

class Engine {
public:
    explicit Engine(EngineConfig config);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    void set_credentials(const SigningCredentials &creds);
    // Use the send-rate limiter in this shared memory (SharedRateLimiter, which must outlive
    // the engine) instead of one of its own: the processes that map it slow down as one.
    void share_rate_limiter(void *memory);

    // length < 0: to the end of the object. size_hint > 0 (the size a listing gave): all parts
    // are queued at once instead of after the first answer; a different size fails the read.
    // part_size > 0: bytes per ranged GET of this read (default: the config's part_size).
    uint64_t submit_get(const std::string &bucket, const std::string &key, int64_t offset,
                        int64_t length, int64_t size_hint = -1, int64_t part_size = 0);
    uint64_t submit_head(const std::string &bucket, const std::string &key);
    uint64_t submit_list(const std::string &bucket, const std::string &prefix,
                         const std::string &delimiter, const std::string &token, int max_keys);

    // True once the ticket is finished (or unknown). Blocks at most timeout_s.
    bool wait(uint64_t id, double timeout_s);
    // Finished tickets among ids; waits at most timeout_s for at least one.
    std::vector<uint64_t> wait_any(const std::vector<uint64_t> &ids, double timeout_s);
    // Blocks at most timeout_s until min_bytes of a GET's result are readable (see Progress) or
    // the ticket is finished; returns how far it has come. The readable bytes are those of the
    // part that starts the result, so a ticket of several parts shows its prefix until it ends.
    Progress wait_readable(uint64_t id, int64_t min_bytes, double timeout_s);
    // Removes a finished ticket and returns its outcome; releases its byte reservation.
    Outcome take(uint64_t id);
    // Abandons a ticket: queued parts are dropped, running transfers aborted promptly.
    void cancel(uint64_t id);
    EngineStats stats();
    void close();

private:
    enum class PartState { Queued, Active, Waiting, Done };

    struct Ticket;

    struct Part {
        uint64_t ticket = 0;
        Ticket *owner = nullptr;  // stable: a ticket outlives its active parts
        size_t index = 0;
        int64_t start = 0;  // absolute byte range wanted, [start, start + len)
        int64_t len = 0;
        bool first = false;
        PartState state = PartState::Queued;
        int attempts = 0;
        int64_t charge = 0;
        bool charged = false;
        Clock::time_point retry_at;
        int throttles = 0;                    // throttled answers in a row
        int throttled_attempts = 0;           // throttled answers in all
        Clock::time_point throttled_since{};  // when the first of them was sent
        // Per attempt:
        CURL *easy = nullptr;
        curl_slist *headers = nullptr;
        char errbuf[CURL_ERROR_SIZE] = {0};
        int status = 0;
        ResponseHeaders response_headers;
        bool got_first_byte = false;
        bool writing = false;        // body bytes go to the ticket's storage
        int64_t stream_pos = 0;      // absolute object offset of the next body byte
        int64_t window_begin = 0;    // absolute range this attempt must deliver
        int64_t window_end = 0;
        int64_t copied = 0;
        int64_t received = 0;
        std::string body;            // error or listing body
        ErrorKind abort_kind = ErrorKind::None;  // set when a callback or a timeout aborts it
        std::string abort_message;
        Clock::time_point started;
        Clock::time_point last_progress;
        Engine *engine = nullptr;
    };

    struct Ticket {
        uint64_t id = 0;
        RequestKind kind = RequestKind::Get;
        std::string bucket;
        std::string key;
        int64_t offset = 0;
        int64_t length = -1;
        int64_t part_size = 0;  // bytes per ranged GET
        Query query;  // LIST
        std::vector<std::unique_ptr<Part>> parts;
        int parts_pending = 0;
        bool layout_known = false;
        int64_t result_len = -1;
        // Bytes of the result, from its start, written by the part that starts it: advanced
        // by that part's body callback (without the lock), never moved back by a retry.
        std::atomic<int64_t> readable{0};
        int64_t wanted = 0;  // readable bytes a blocked wait_readable needs (under the lock)
        bool complete = false;
        bool cancelled = false;
        int64_t charge = 0;
        Outcome outcome;
        Clock::time_point created;
        double first_byte_s = -1.0;
        int attempts = 0;
    };

    // Marks a ticket as waited on (exempt from the byte budget) while a caller blocks on it.
    struct WaitMark {
        WaitMark(Engine &e, uint64_t id);
        ~WaitMark();
        Engine &engine;
        uint64_t ticket;
    };

    // engine.cpp
    uint64_t submit(std::unique_ptr<Ticket> ticket, int64_t size_hint = -1);
    void wake_engine();  // with mu_ held
    LimiterAccess limiter() { return LimiterAccess(own_limiter_, shared_limiter_); }
    // engine_scheduler.cpp
    void add_part(Ticket &t, int64_t start, int64_t len, bool first);
    uint64_t head_ticket() const;
    void charge(Ticket &t, Part &p, int64_t bytes);
    void release(Ticket &t);
    void admit();
    void reap_cancelled();
    void promote_retries(Clock::time_point now);
    double backoff_s(int attempt);
    void fail(Ticket &t, Part &p, Failure f);
    bool throttled_retry(Part &p, Failure &f, Clock::time_point now);
    void fail_ticket(Ticket &t, const Failure &f);
    void finish_part(Ticket &t, Part &p);
    void complete(Ticket &t);
    // engine_loop.cpp
    void run();
    int poll_timeout_ms(Clock::time_point now);
    void detach(Part &p);
    void check_timeouts(Clock::time_point now);
    void drain_messages();
    void notify_readable();
    // engine_attempt.cpp
    void start_part(Ticket &t, Part &p);
    void on_done(Ticket &t, Part &p, CURLcode rc);
    bool prepare_get(Ticket &t, Part &p);
    static size_t header_cb(char *data, size_t size, size_t n, void *user);
    static size_t write_cb(char *data, size_t size, size_t n, void *user);

    EngineConfig config_;
    UrlParts endpoint_;
    SigningCredentials creds_;
    CURLM *multi_ = nullptr;
    // Finished easy handles kept for the next request: no curl_easy_init per object, and each
    // keeps its receive buffer (CURLOPT_BUFFERSIZE) instead of allocating one per request.
    std::vector<CURL *> idle_easy_;
    std::mutex mu_;
    std::unique_ptr<std::condition_variable> done_cv_;  // leaked in a forked child
    std::thread thread_;
    int owner_pid_;  // the process whose thread drives this engine
    bool stop_ = false;
    bool closed_ = false;
    bool notify_ = false;   // tickets completed since waiters were last woken
    bool polling_ = false;  // the engine thread is (about to be) blocked in curl_multi_poll
    bool woken_ = false;    // a wakeup was sent during this poll
    uint64_t next_id_ = 1;
    std::map<uint64_t, std::unique_ptr<Ticket>> tickets_;
    std::set<std::pair<uint64_t, size_t>> ready_;   // (ticket, part) in priority order
    std::vector<std::pair<uint64_t, size_t>> waiting_;  // parts waiting out a backoff
    std::map<CURL *, Part *> active_;
    std::vector<uint64_t> cancelled_;
    std::map<uint64_t, int> waited_;  // tickets callers are blocked on
    std::set<uint64_t> watched_;      // tickets a wait_readable is blocked on
    EngineStats stats_;
    RateLimiter own_limiter_;
    SharedRateLimiter *shared_limiter_ = nullptr;  // in memory shared with forked processes
    Clock::time_point limited_since_{};  // when admission last began to wait for the limiter
    std::mt19937_64 rng_;
};

}  // namespace nl
