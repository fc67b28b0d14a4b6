// The curl loop: the engine thread's perform/poll rounds, finished transfers and timeouts.
// See engine.hpp.
#include "engine.hpp"

#include <algorithm>
#include <utility>

namespace nl {

namespace {

constexpr int IDLE_POLL_MS = 100;

}  // namespace

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
        notify_readable();
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

int Engine::poll_timeout_ms(Clock::time_point now) {
    int timeout = IDLE_POLL_MS;
    if (!active_.empty()) timeout = 20;  // timeouts are checked between polls
    for (const auto &[tid, idx] : waiting_) {
        auto it = tickets_.find(tid);
        if (it == tickets_.end()) continue;
        const Part &p = *it->second->parts[idx];
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(p.retry_at - now).count();
        timeout = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(timeout, ms + 1)));
    }
    if (limited_since_ != Clock::time_point{} && !ready_.empty()) {  // waiting for a token
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      limiter()->next_token(now) - now)
                      .count();
        timeout = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(timeout, ms + 1)));
    }
    return timeout;
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
                p->abort_kind = ErrorKind::Timeout;
                p->abort_message = "no response within first_byte_timeout_s";
                expired.push_back(p);
            }
        } else if (seconds_since(p->last_progress, now) > config_.stall_timeout_s) {
            p->abort_kind = ErrorKind::Timeout;
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

void Engine::notify_readable() {
    for (uint64_t id : watched_) {
        auto it = tickets_.find(id);
        if (it == tickets_.end()) continue;
        const Ticket &t = *it->second;
        if (t.readable.load(std::memory_order_acquire) >= t.wanted) notify_ = true;
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

}  // namespace nl
