// The transfer engine: one background thread driving a libcurl multi handle (connections are
// kept alive and reused), a priority queue of part requests admitted under request and byte
// budgets, per-part retries with capped exponential backoff and jitter, and timeouts.
//
// Threads: callers submit tickets and wait for them (without the GIL); only the engine thread
// touches curl. Every piece of shared state is guarded by one mutex, which the engine thread
// does not hold while curl moves bytes: the body callbacks touch only their own part and its
// ticket's result storage (neither can go away while the part is active), and take the lock
// for the rest, so callers collect results and submit while transfers run.
#pragma once

#include <curl/curl.h>

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

#include "buffer.hpp"
#include "s3.hpp"
#include "sigv4.hpp"
#include "url.hpp"

namespace nl {

using Clock = std::chrono::steady_clock;

struct EngineConfig {
    std::string endpoint;  // scheme://host[:port][/base]
    std::string region = "us-east-1";
    bool path_style = true;
    bool unsigned_requests = false;
    int max_inflight_requests = 32;
    int64_t max_inflight_bytes = 256LL << 20;
    int64_t part_size = 8LL << 20;
    double connect_timeout_s = 5.0;
    double first_byte_timeout_s = 30.0;
    double stall_timeout_s = 30.0;
    int max_attempts = 5;
    double backoff_base_s = 0.05;
    double backoff_max_s = 5.0;
    std::string ca_bundle;  // PEM file of trusted CAs; empty: the system's
};

// What a finished ticket produced. error_kind is empty on success, else one of
// "http" (S3 answered with an error), "timeout", "connect", "network", "protocol", "memory"
// (the result could not be allocated), "closed".
struct Outcome {
    std::shared_ptr<Storage> data;  // GET
    int64_t object_size = -1;       // GET, HEAD
    std::string etag;               // GET, HEAD
    ListPage list;                  // LIST
    std::string error_kind;
    int status = 0;
    std::string code;
    std::string message;
    std::string request_id;
    int attempts = 0;
    double first_byte_s = 0.0;
    double elapsed_s = 0.0;
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
};

class Engine {
public:
    explicit Engine(EngineConfig config);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    void set_credentials(const SigningCredentials &creds);

    // length < 0: to the end of the object. size_hint > 0 (the size a listing gave): all parts
    // are queued at once instead of after the first answer; a different size fails the read.
    uint64_t submit_get(const std::string &bucket, const std::string &key, int64_t offset,
                        int64_t length, int64_t size_hint = -1);
    uint64_t submit_head(const std::string &bucket, const std::string &key);
    uint64_t submit_list(const std::string &bucket, const std::string &prefix,
                         const std::string &delimiter, const std::string &token, int max_keys);

    // True once the ticket is finished (or unknown). Blocks at most timeout_s.
    bool wait(uint64_t id, double timeout_s);
    // Finished tickets among ids; waits at most timeout_s for at least one.
    std::vector<uint64_t> wait_any(const std::vector<uint64_t> &ids, double timeout_s);
    // Removes a finished ticket and returns its outcome; releases its byte reservation.
    Outcome take(uint64_t id);
    // Abandons a ticket: queued parts are dropped, running transfers aborted promptly.
    void cancel(uint64_t id);
    EngineStats stats();
    void close();

private:
    enum class Kind { Get, Head, List };
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
        // Per attempt:
        CURL *easy = nullptr;
        curl_slist *headers = nullptr;
        char errbuf[CURL_ERROR_SIZE] = {0};
        int status = 0;
        std::map<std::string, std::string> response_headers;
        bool got_first_byte = false;
        bool writing = false;        // body bytes go to the ticket's storage
        int64_t stream_pos = 0;      // absolute object offset of the next body byte
        int64_t window_begin = 0;    // absolute range this attempt must deliver
        int64_t window_end = 0;
        int64_t copied = 0;
        int64_t received = 0;
        std::string body;            // error or listing body
        std::string abort_kind;      // set when a callback or a timeout aborts the attempt
        std::string abort_message;
        Clock::time_point started;
        Clock::time_point last_progress;
        Engine *engine = nullptr;
    };

    struct Ticket {
        uint64_t id = 0;
        Kind kind = Kind::Get;
        std::string bucket;
        std::string key;
        int64_t offset = 0;
        int64_t length = -1;
        std::vector<std::pair<std::string, std::string>> query;  // LIST
        std::vector<std::unique_ptr<Part>> parts;
        int parts_pending = 0;
        bool layout_known = false;
        int64_t result_len = -1;
        bool complete = false;
        bool cancelled = false;
        int64_t charge = 0;
        Outcome outcome;
        Clock::time_point created;
        double first_byte_s = -1.0;
        int attempts = 0;
    };

    struct Failure {
        std::string kind;
        int status = 0;
        std::string code;
        std::string message;
        std::string request_id;
        bool retryable = false;
    };

    // Marks a ticket as waited on (exempt from the byte budget) while a caller blocks on it.
    struct WaitMark {
        WaitMark(Engine &e, uint64_t id);
        ~WaitMark();
        Engine &engine;
        uint64_t ticket;
    };

    uint64_t submit(std::unique_ptr<Ticket> ticket, int64_t size_hint = -1);
    void add_part(Ticket &t, int64_t start, int64_t len, bool first);
    void run();
    void admit();
    void start_part(Ticket &t, Part &p);
    void drain_messages();
    void check_timeouts(Clock::time_point now);
    void promote_retries(Clock::time_point now);
    void reap_cancelled();
    void detach(Part &p);
    void on_done(Ticket &t, Part &p, CURLcode rc);
    void finish_part(Ticket &t, Part &p);
    void fail(Ticket &t, Part &p, Failure f);
    void fail_ticket(Ticket &t, const Failure &f);
    void complete(Ticket &t);
    void charge(Ticket &t, Part &p, int64_t bytes);
    void release(Ticket &t);
    bool prepare_get(Ticket &t, Part &p);
    uint64_t head_ticket() const;
    double backoff_s(int attempt);
    int poll_timeout_ms(Clock::time_point now) const;
    void wake_engine();  // with mu_ held

    static size_t header_cb(char *data, size_t size, size_t n, void *user);
    static size_t write_cb(char *data, size_t size, size_t n, void *user);

    EngineConfig config_;
    UrlParts endpoint_;
    SigningCredentials creds_;
    CURLM *multi_ = nullptr;
    // Finished easy handles kept for the next request: no curl_easy_init per object, and each
    // keeps its 256 KiB receive buffer (allocating it per request cost ~0.05 ms per object).
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
    EngineStats stats_;
    std::mt19937_64 rng_;
};

}  // namespace nl
