// The part scheduler: admission under the request and byte budgets and the adaptive send rate,
// retries with backoff, and completion of tickets. See engine.hpp. Runs with the engine's lock
// held.
#include "engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace nl {

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
    Clock::time_point now = Clock::now();
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
        // The send rate, once the endpoint has throttled: no part starts before its token.
        if (config_.adaptive_rate && !limiter()->try_acquire(now)) {
            if (limited_since_ == Clock::time_point{}) limited_since_ = now;
            break;
        }
        if (limited_since_ != Clock::time_point{}) {
            double waited_s = seconds_since(limited_since_, now);
            stats_.rate_limited_ms += static_cast<int64_t>(1000 * waited_s);
            limited_since_ = Clock::time_point{};
        }
        it = ready_.erase(it);
        start_part(t, p);
        // A start that failed the ticket (no memory, no curl handle) removed its queued parts
        // from ready_, which may include the one `it` points to.
        if (t.complete) it = ready_.begin();
    }
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

double Engine::backoff_s(int attempt) {
    double cap = std::min(config_.backoff_max_s,
                          config_.backoff_base_s * std::pow(2.0, std::max(0, attempt - 1)));
    std::uniform_real_distribution<double> jitter(0.5, 1.0);  // "equal jitter"
    return cap * jitter(rng_);
}

// A throttled answer: slows the send rate, and is retried until the part has been throttled
// without a break for max_throttled_s (not counted against max_attempts: throttling is the
// endpoint asking for patience, not a fault). Returns whether to retry; if not, says why in f.
bool Engine::throttled_retry(Part &p, Failure &f, Clock::time_point now) {
    stats_.throttled += 1;
    if (config_.adaptive_rate && limiter()->on_throttle(now, p.started)) stats_.rate_cuts += 1;
    if (p.throttles == 0) p.throttled_since = p.started;
    p.throttles += 1;
    p.throttled_attempts += 1;
    double for_s = seconds_since(p.throttled_since, now);
    if (for_s < config_.max_throttled_s) return true;
    char head[160];
    std::snprintf(head, sizeof head,
                  "throttled by the endpoint without a break for %.1f s (%d answers asking to "
                  "slow down), past max_throttled_s=%g",
                  for_s, p.throttles, config_.max_throttled_s);
    f.message = std::string(head) + (f.message.empty() ? "" : "; S3 said: " + f.message);
    return false;
}

void Engine::fail(Ticket &t, Part &p, Failure f) {
    Clock::time_point now = Clock::now();
    if (f.throttled && f.retryable) {
        if (throttled_retry(p, f, now) && !stop_) {
            stats_.retries += 1;
            p.state = PartState::Waiting;
            p.retry_at = now + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(backoff_s(p.throttles)));
            waiting_.emplace_back(t.id, p.index);
            return;
        }
        p.state = PartState::Done;
        fail_ticket(t, f);
        return;
    }
    p.throttles = 0;  // a break in the throttling
    // Throttled attempts are not counted against max_attempts.
    int attempts = p.attempts - p.throttled_attempts;
    if (f.retryable && attempts < config_.max_attempts && !stop_) {
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

}  // namespace nl
