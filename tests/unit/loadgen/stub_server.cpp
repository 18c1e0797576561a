#include "stub_server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tmill::test {

using Clock = std::chrono::steady_clock;

namespace {

int count_words(const std::string& s) {
  std::istringstream in(s);
  std::string w;
  int n = 0;
  while (in >> w) ++n;
  return n;
}

std::string error_json(const std::string& msg, int code) {
  return nlohmann::json{{"object", "error"}, {"message", msg}, {"type", "stub_error"}, {"code", code}}.dump();
}

}  // namespace

StubServer::StubServer(StubConfig cfg) : cfg_(std::move(cfg)), svr_(std::make_unique<httplib::Server>()) {
  auto& s = *svr_;
  s.new_task_queue = [] { return new httplib::ThreadPool(640); };
  s.set_keep_alive_max_count(100000);
  s.set_keep_alive_timeout(30);
  // cpp-httplib 0.11 listens with a backlog of 5: hundreds of simultaneous connects would overflow
  // the accept queue. Remember the listening socket and raise its backlog after binding.
  s.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const auto up = std::chrono::steady_clock::now() - started_;
    if (req.path == "/metrics" || up >= std::chrono::milliseconds(cfg_.loading_ms))
      return httplib::Server::HandlerResponse::Unhandled;
    res.status = 503;
    res.set_content(error_json("the model is loading", 503), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json j = {{"object", "list"},
                        {"data", {{{"id", cfg_.model}, {"object", "model"}, {"max_model_len", cfg_.max_model_len}}}}};
    res.set_content(j.dump(), "application/json");
  });
  s.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    if (!cfg_.metrics) {
      res.status = 404;
      return;
    }
    int run, wait;
    {
      std::lock_guard<std::mutex> g(mu_);
      run = running_;
      wait = waiting_;
    }
    const double cap = cfg_.max_parallel > 0 ? cfg_.max_parallel : 64;
    std::string lbl = "{model_name=\"" + cfg_.model + "\"}";
    std::string t;
    t += "# HELP vllm:num_requests_running Number of requests in model execution batches.\n";
    t += "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running" + lbl + " " + std::to_string(run) + ".0\n";
    t += "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting" + lbl + " " + std::to_string(wait) + ".0\n";
    t += "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc" + lbl + " " + std::to_string(std::min(1.0, run / cap)) + "\n";
    t += "# TYPE vllm:num_preemptions counter\nvllm:num_preemptions_total" + lbl + " " + std::to_string(preemptions_.load()) + ".0\n";
    t += "vllm:num_preemptions_created" + lbl + " 1.7e9\n";
    res.set_content(t, "text/plain; version=0.0.4");
  });
  auto generate = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      const int n = requests_.fetch_add(1) + 1;
      {
        std::lock_guard<std::mutex> g(mu_);
        last_body_ = req.body;
      }
      auto body = nlohmann::json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object()) {
        res.status = 400;
        res.set_content(error_json("bad JSON", 400), "application/json");
        return;
      }
      if (cfg_.fail_status && (cfg_.fail_every <= 1 || n % cfg_.fail_every == 0)) {
        res.status = cfg_.fail_status;
        res.set_content(error_json("stub failure", cfg_.fail_status), "application/json");
        return;
      }
      int prompt_tokens = 0;
      if (chat) {
        for (const auto& m : body.value("messages", nlohmann::json::array()))
          if (m.contains("content") && m["content"].is_string()) prompt_tokens += count_words(m["content"].get<std::string>());
        prompt_tokens += 5;
      } else {
        prompt_tokens = count_words(body.value("prompt", std::string()));
      }
      const int out_tokens = body.value("max_tokens", cfg_.default_tokens);
      const bool usage = cfg_.send_usage && body.contains("stream_options") &&
                         body["stream_options"].value("include_usage", false);
      int status = 200;
      if (!admit(&status)) {
        res.status = status;
        res.set_content(error_json("server busy", status), "application/json");
        return;
      }
      const bool drop = cfg_.drop_after_chunks >= 0 && (cfg_.drop_every <= 1 || n % cfg_.drop_every == 0);
      struct State {
        int sent_tokens = 0, chunks = 0;
        bool role_sent = false, finished = false;
        Clock::time_point first;
      };
      auto st = std::make_shared<State>();
      st->first = Clock::now() + std::chrono::milliseconds(cfg_.ttft_ms) +
                  std::chrono::microseconds(static_cast<int64_t>(cfg_.prefill_us_per_token) * prompt_tokens);
      const std::string eol = cfg_.crlf ? "\r\n" : "\n";
      const std::string id = "cmpl-stub-" + std::to_string(n);
      auto event = [eol](const std::string& data) { return "data: " + data + eol + eol; };
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [=, this](size_t, httplib::DataSink& sink) {
            if (chat && cfg_.role_chunk && !st->role_sent) {
              st->role_sent = true;
              nlohmann::json j = {{"id", id}, {"object", "chat.completion.chunk"}, {"model", cfg_.model},
                                  {"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}}}}};
              std::string e = event(j.dump());
              return sink.write(e.data(), e.size());
            }
            if (st->sent_tokens < out_tokens) {
              if (drop && st->chunks >= cfg_.drop_after_chunks) return false;  // connection drops
              if (st->chunks == 0 && cfg_.hold_until_running > 0) {
                std::unique_lock<std::mutex> lk(mu_);
                if (cv_.wait_for(lk, std::chrono::milliseconds(cfg_.hold_timeout_ms),
                                 [&] { return max_running_.load() >= cfg_.hold_until_running; }))
                  st->first = std::max(st->first, Clock::now());
              }
              std::this_thread::sleep_until(st->first + std::chrono::milliseconds(cfg_.itl_ms) * st->chunks);
              const int k = std::min(cfg_.tokens_per_chunk, out_tokens - st->sent_tokens);
              std::string text;
              for (int i = 0; i < k; ++i) text += "tok ";
              st->sent_tokens += k;
              ++st->chunks;
              const bool last = st->sent_tokens >= out_tokens;
              nlohmann::json fin = last ? nlohmann::json("length") : nlohmann::json(nullptr);
              nlohmann::json j;
              if (chat)
                j = {{"id", id}, {"object", "chat.completion.chunk"}, {"model", cfg_.model},
                     {"choices", {{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", fin}}}}};
              else
                j = {{"id", id}, {"object", "text_completion"}, {"model", cfg_.model},
                     {"choices", {{{"index", 0}, {"text", text}, {"finish_reason", fin}}}}};
              std::string e = event(j.dump());
              return sink.write(e.data(), e.size());
            }
            std::string tail;
            if (usage) {
              nlohmann::json u = {{"id", id}, {"model", cfg_.model}, {"choices", nlohmann::json::array()},
                                  {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", out_tokens},
                                             {"total_tokens", prompt_tokens + out_tokens}}}};
              tail += event(u.dump());
            }
            tail += ": stub keep-alive comment" + eol;
            tail += event("[DONE]");
            sink.write(tail.data(), tail.size());
            sink.done();
            return true;
          },
          [this](bool) { release(); });
    };
  };
  s.Post("/v1/chat/completions", generate(true));
  s.Post("/v1/completions", generate(false));
  port_ = s.bind_to_any_port("127.0.0.1");
  if (listen_fd_ >= 0) ::listen(listen_fd_, 4096);
  thread_ = std::thread([this] { svr_->listen_after_bind(); });
  while (!svr_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

StubServer::~StubServer() { stop(); }

void StubServer::stop() {
  if (svr_) svr_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string StubServer::last_body() const {
  std::lock_guard<std::mutex> g(mu_);
  return last_body_;
}

bool StubServer::admit(int* status) {
  std::unique_lock<std::mutex> lk(mu_);
  if (cfg_.reject_above > 0 && running_ + waiting_ >= cfg_.reject_above) {
    rejected_.fetch_add(1);
    *status = 429;
    return false;
  }
  ++waiting_;
  cv_.wait(lk, [&] { return cfg_.max_parallel <= 0 || running_ < cfg_.max_parallel; });
  --waiting_;
  ++running_;
  if (cfg_.preempt_above > 0 && running_ > cfg_.preempt_above) preemptions_.fetch_add(1);
  for (int m = max_running_.load(); running_ > m && !max_running_.compare_exchange_weak(m, running_);) {
  }
  if (cfg_.hold_until_running > 0) cv_.notify_all();
  return true;
}

void StubServer::release() {
  std::lock_guard<std::mutex> g(mu_);
  --running_;
  cv_.notify_all();
}

}  // namespace tmill::test
