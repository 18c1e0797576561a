#include "loadgen/client.h"

#include <httplib.h>

#include <chrono>
#include <cmath>

namespace tmill::loadgen {

using Clock = std::chrono::steady_clock;

const char* endpoint_name(Endpoint e) { return e == Endpoint::Chat ? "chat" : "completions"; }
const char* endpoint_path(Endpoint e) {
  return e == Endpoint::Chat ? "/v1/chat/completions" : "/v1/completions";
}

Result<ServerUrl> parse_base_url(std::string_view url) {
  std::string u(url);
  while (!u.empty() && u.back() == '/') u.pop_back();
  auto scheme_end = u.find("://");
  if (scheme_end == std::string::npos) return Error{"base URL '" + u + "' needs http:// or https://"};
  std::string scheme = u.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return Error{"base URL scheme must be http or https"};
  auto host_start = scheme_end + 3;
  auto slash = u.find('/', host_start);
  ServerUrl s;
  s.origin = u.substr(0, slash);
  if (s.origin.size() <= host_start) return Error{"base URL '" + u + "' has no host"};
  s.prefix = slash == std::string::npos ? "" : u.substr(slash);
  if (s.prefix.size() >= 3 && s.prefix.compare(s.prefix.size() - 3, 3, "/v1") == 0)
    s.prefix.resize(s.prefix.size() - 3);
  return s;
}

std::string failure_label(FailureKind kind, int http_status) {
  switch (kind) {
    case FailureKind::None: return "none";
    case FailureKind::Http: return "http_" + std::to_string(http_status);
    case FailureKind::StreamError: return "stream_error";
    case FailureKind::Timeout: return "timeout";
    case FailureKind::Connection: return "connection";
    case FailureKind::Disconnect: return "disconnect";
    case FailureKind::Malformed: return "malformed_stream";
  }
  return "unknown";
}

// ---- stream decoding ------------------------------------------------------------------------

void StreamAccumulator::on_bytes(std::string_view bytes, double t) {
  parser_.feed(bytes, [&](const SseEvent& ev) { on_event(ev, t); });
}

void StreamAccumulator::on_end() {
  parser_.finish([&](const SseEvent& ev) { on_event(ev, -1); });
}

static bool non_empty_string(const nlohmann::json& obj, const char* key, size_t* len) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return false;
  const auto& s = it->get_ref<const std::string&>();
  *len += s.size();
  return !s.empty();
}

void StreamAccumulator::on_event(const SseEvent& ev, double t) {
  if (done_ || malformed_) return;
  if (ev.data == "[DONE]") {
    done_ = true;
    return;
  }
  if (ev.event == "error") {
    stream_error_ = ev.data.substr(0, 300);
    return;
  }
  nlohmann::json j = nlohmann::json::parse(ev.data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    malformed_ = true;
    malformed_msg_ = "undecodable event: " + ev.data.substr(0, 200);
    return;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    stream_error_ = e->is_object() && e->contains("message") && (*e)["message"].is_string()
                        ? (*e)["message"].get<std::string>()
                        : e->dump().substr(0, 300);
    return;
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    auto num = [&](const char* k) {
      auto it = u->find(k);
      return it != u->end() && it->is_number_integer() ? it->get<int>() : -1;
    };
    int pt = num("prompt_tokens"), ct = num("completion_tokens");
    if (ct >= 0) {
      usage_ = true;
      completion_tokens_ = ct;
      prompt_tokens_ = std::max(pt, 0);
    }
  }
  auto ch = j.find("choices");
  if (ch == j.end() || !ch->is_array() || ch->empty() || !(*ch)[0].is_object()) return;
  const auto& c0 = (*ch)[0];
  bool content = false;
  if (endpoint_ == Endpoint::Chat) {
    auto d = c0.find("delta");
    if (d != c0.end() && d->is_object()) {
      bool a = non_empty_string(*d, "content", &chars_);
      bool b = non_empty_string(*d, "reasoning_content", &chars_);
      bool c = non_empty_string(*d, "reasoning", &chars_);
      content = a || b || c;
    }
  } else {
    content = non_empty_string(c0, "text", &chars_);
  }
  if (auto f = c0.find("finish_reason"); f != c0.end() && f->is_string()) finish_reason_ = f->get<std::string>();
  if (content && t >= 0) chunks_.push_back(t);
}

int count_resent(const std::vector<RequestResult>& requests) {
  int n = 0;
  for (const auto& r : requests) n += r.resent ? 1 : 0;
  return n;
}

void StreamAccumulator::fill(RequestResult& r) const {
  r.chunk_s = chunks_;
  r.ttft_s = chunks_.empty() ? r.e2el_s : chunks_.front();
  r.usage_reported = usage_;
  r.output_tokens = usage_ ? completion_tokens_ : static_cast<int>(chunks_.size());
  r.prompt_tokens = prompt_tokens_;
  r.output_chars = chars_;
  r.finish_reason = finish_reason_;
  r.success = false;
  if (malformed()) {
    r.failure = FailureKind::Malformed;
    r.error = malformed_msg_.empty() ? "over-long SSE line" : malformed_msg_;
  } else if (!stream_error_.empty()) {
    r.failure = FailureKind::StreamError;
    r.error = stream_error_;
  } else if (!done_ && finish_reason_.empty()) {
    r.failure = FailureKind::Disconnect;
    r.error = "stream ended before [DONE]";
  } else {
    r.success = true;
    r.failure = FailureKind::None;
  }
}

nlohmann::json build_request_body(Endpoint e, const std::string& model, const Prompt& p,
                                  int max_tokens, bool ignore_eos) {
  nlohmann::json b;
  b["model"] = model;
  if (e == Endpoint::Chat) {
    b["messages"] = p.messages.is_array() ? p.messages
                                          : nlohmann::json::array({{{"role", "user"}, {"content", p.text}}});
  } else if (p.messages.is_array()) {
    // A completions endpoint takes a plain prompt: join the message contents.
    std::string text;
    for (const auto& m : p.messages)
      if (m.contains("content") && m["content"].is_string()) text += m["content"].get<std::string>() + "\n";
    b["prompt"] = text;
  } else {
    b["prompt"] = p.text;
  }
  if (max_tokens > 0) b["max_tokens"] = max_tokens;
  b["temperature"] = 0.0;
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  if (ignore_eos) b["ignore_eos"] = true;
  return b;
}

bool structured_request(size_t index, double fraction) {
  if (fraction <= 0) return false;
  const auto i = static_cast<double>(index);
  return std::floor((i + 1) * fraction) > std::floor(i * fraction);
}

const std::string& default_structured_schema() {
  static const std::string s = R"({"type":"object","properties":{
    "title":{"type":"string","maxLength":80},"year":{"type":"integer","minimum":1900,"maximum":2100},
    "rating":{"type":"number"},"genre":{"enum":["drama","comedy","documentary","thriller"]},
    "tags":{"type":"array","items":{"type":"string","maxLength":20},"maxItems":5},
    "summary":{"type":"string"}},
    "required":["title","year","rating","genre","tags","summary"],"additionalProperties":false})";
  return s;
}

void add_json_schema(nlohmann::json& body, const nlohmann::json& schema) {
  body["response_format"] = {{"type", "json_schema"},
                             {"json_schema", {{"name", "bench"}, {"schema", schema}, {"strict", true}}}};
}

// ---- HTTP client ----------------------------------------------------------------------------

static void set_timeouts(httplib::Client& c, double connect_s, double read_s) {
  auto split = [](double s, time_t* sec, time_t* usec) {
    s = std::max(s, 0.001);
    *sec = static_cast<time_t>(s);
    *usec = static_cast<time_t>((s - static_cast<double>(*sec)) * 1e6);
  };
  time_t sec, usec;
  split(connect_s, &sec, &usec);
  c.set_connection_timeout(sec, usec);
  split(read_s, &sec, &usec);
  c.set_read_timeout(sec, usec);
  c.set_write_timeout(sec, usec);
}

OpenAiClient::OpenAiClient(const ServerUrl& url, std::string api_key, double timeout_s)
    : url_(url), api_key_(std::move(api_key)), timeout_s_(timeout_s),
      cli_(std::make_unique<httplib::Client>(url.origin)) {
  cli_->set_keep_alive(true);
  cli_->set_tcp_nodelay(true);
  if (!api_key_.empty()) cli_->set_bearer_token_auth(api_key_);
  set_timeouts(*cli_, std::min(timeout_s_, 30.0), timeout_s_);
}

OpenAiClient::~OpenAiClient() = default;

Result<std::string> OpenAiClient::get(const std::string& path, double timeout_s) {
  set_timeouts(*cli_, std::min(timeout_s, 30.0), timeout_s);
  auto res = cli_->Get(url_.prefix + path);
  set_timeouts(*cli_, std::min(timeout_s_, 30.0), timeout_s_);
  if (!res) return Error{"GET " + path + ": " + httplib::to_string(res.error())};
  if (res->status != 200) return Error{"GET " + path + ": HTTP " + std::to_string(res->status)};
  return res->body;
}

Result<std::vector<ModelInfo>> OpenAiClient::list_models() {
  TM_ASSIGN_OR_RETURN(auto body, get("/v1/models", std::min(timeout_s_, 30.0)));
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array())
    return Error{"GET /v1/models: not an OpenAI model list"};
  std::vector<ModelInfo> out;
  for (const auto& m : j["data"]) {
    if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
    ModelInfo mi;
    mi.id = m["id"].get<std::string>();
    for (const char* k : {"max_model_len", "context_length", "n_ctx"})
      if (m.contains(k) && m[k].is_number_integer()) {
        mi.max_model_len = m[k].get<int>();
        break;
      }
    out.push_back(std::move(mi));
  }
  return out;
}

Status OpenAiClient::alive(double timeout_s) {
  auto health = get("/health", timeout_s);
  if (health.ok() || get("/v1/models", timeout_s).ok()) return {};
  return health.error_value();
}

RequestResult OpenAiClient::stream(Endpoint e, const nlohmann::json& body) {
  RequestResult r;
  StreamAccumulator acc(e);
  std::string error_body;
  bool timed_out = false, got_headers = false, event_stream = true;
  const auto t0 = Clock::now();
  auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };

  httplib::Request req;
  req.method = "POST";
  req.path = url_.prefix + endpoint_path(e);
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  try {
    req.body = body.dump();
  } catch (const std::exception& ex) {  // invalid UTF-8 in a prompt
    r.failure = FailureKind::Connection;
    r.error = std::string("cannot encode request: ") + ex.what();
    return r;
  }
  req.response_handler = [&](const httplib::Response& res) {
    got_headers = true;
    r.http_status = res.status;
    auto ct = res.get_header_value("Content-Type");
    event_stream = ct.empty() || ct.find("text/event-stream") != std::string::npos;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const double t = since();
    if (t > timeout_s_) {
      timed_out = true;
      return false;
    }
    if (r.http_status != 200 || !event_stream) {
      if (error_body.size() < 4096) error_body.append(data, std::min<size_t>(n, 4096));
      return true;
    }
    acc.on_bytes(std::string_view(data, n), t);
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool reused = cli_->is_socket_open() != 0;  // a kept-alive connection from an earlier request
  bool ok = cli_->send(req, res, err);
  const bool closed_before_reply = !ok && !got_headers && !timed_out &&
                                   (err == httplib::Error::Read || err == httplib::Error::Write);
  if (closed_before_reply && reused) {
    cli_->stop();  // the dead connection; the next send opens a new one
    res = httplib::Response();
    err = httplib::Error::Success;
    ok = cli_->send(req, res, err);
    r.resent = true;
  }
  r.e2el_s = since();
  if (!ok || err != httplib::Error::Success) {
    FailureKind kind;
    std::string msg;
    const bool slow = r.e2el_s >= timeout_s_ * 0.98;
    if (timed_out || (slow && (err == httplib::Error::Read || err == httplib::Error::ConnectionTimeout))) {
      kind = FailureKind::Timeout;
      msg = "no complete response within " + std::to_string(timeout_s_) + " s";
    } else if (got_headers && r.http_status == 200) {
      kind = FailureKind::Disconnect;
      msg = "connection lost mid-stream (" + httplib::to_string(err) + ")";
    } else if (got_headers) {
      kind = FailureKind::Http;
      msg = "HTTP " + std::to_string(r.http_status) + " (body cut: " + httplib::to_string(err) + ")";
    } else {
      kind = FailureKind::Connection;
      msg = httplib::to_string(err);
      // Refused (nothing listens) as opposed to a connection dropped after the request was sent; a
      // resent request had been sent once already.
      r.connect_failed = err == httplib::Error::Connection && !r.resent;
    }
    acc.fill(r);  // keeps the partial timings for the timeline
    r.success = false;
    r.failure = kind;
    r.error = msg;
    return r;
  }
  r.http_status = res.status;
  if (res.status != 200) {
    r.failure = FailureKind::Http;
    r.error = "HTTP " + std::to_string(res.status) + ": " + error_body.substr(0, 300);
    r.ttft_s = r.e2el_s;
    return r;
  }
  if (!event_stream) {
    r.failure = FailureKind::Malformed;
    r.error = "response is not an event stream: " + error_body.substr(0, 200);
    r.ttft_s = r.e2el_s;
    return r;
  }
  acc.on_end();
  acc.fill(r);
  return r;
}

}  // namespace tmill::loadgen
