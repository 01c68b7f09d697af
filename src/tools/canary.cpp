// `fp4serve canary URL`: asks a running server the canary questions (canary_checks.h) through
// /v1/chat/completions, greedy, each alone and then all at once in a concurrent batch (the seeds'
// regression only showed under load), with thinking off and on. One verdict line per check; exit 0
// when all pass, 1 otherwise.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <thread>

#include "tools/bench/http_client.h"
#include "tools/canary_checks.h"
#include "tools/commands.h"

namespace fp4serve::tools {
namespace {

struct CanaryArgs {
  std::string url;
  std::string model;
  std::string api_key;
  int concurrency = 8;
  int max_tokens = 64;
  int thinking_max_tokens = 512;
};

struct Verdict {
  std::string label;
  std::string problem;  // "" = pass
  std::string answer;
};

std::string first_model(const bench::BaseUrl& base, const bench::HeaderMap& headers) {
  const auto r = bench::http_get(base, "/v1/models", headers);
  if (r.status != 200) throw std::runtime_error(fmt::format("GET /v1/models: HTTP {}: {}", r.status, r.body));
  return nlohmann::json::parse(r.body).at("data").at(0).at("id").get<std::string>();
}

// The answer text: content, plus the reasoning when thinking is on (a thinking model may put the
// answer in either place when it runs out of tokens).
Verdict ask(const bench::BaseUrl& base, const bench::HeaderMap& headers, const CanaryArgs& a, const std::string& model,
            const CanaryCheck& check, bool thinking, const std::string& label) {
  nlohmann::json content = check.prompt;
  if (!check.image_url.empty()) {
    content = nlohmann::json::array({{{"type", "image_url"}, {"image_url", {{"url", check.image_url}}}},
                                     {{"type", "text"}, {"text", check.prompt}}});
  }
  nlohmann::json body = {
      {"model", model},
      {"messages", {{{"role", "user"}, {"content", content}}}},
      {"temperature", 0},
      {"max_tokens", thinking ? a.thinking_max_tokens : a.max_tokens},
      {"chat_template_kwargs", {{"enable_thinking", thinking}}},
  };
  Verdict v{label, "", ""};
  try {
    const auto r = bench::http_post_json(base, "/v1/chat/completions", body.dump(), headers);
    if (r.status != 200) {
      v.problem = fmt::format("HTTP {}: {}", r.status, answer_preview(r.body, 200));
      return v;
    }
    const auto j = nlohmann::json::parse(r.body);
    const auto& msg = j.at("choices").at(0).at("message");
    const auto text = [&](const char* k) {
      return msg.contains(k) && msg[k].is_string() ? msg[k].get<std::string>() : std::string();
    };
    v.answer = text("content");
    const std::string reasoning = text("reasoning").empty() ? text("reasoning_content") : text("reasoning");
    const std::string judged = thinking && !reasoning.empty() ? reasoning + "\n" + v.answer : v.answer;
    v.problem = check_problem(check, judged);
    // With thinking on, the reasoning alone may be judged; say when the answer itself was empty.
    if (!v.problem.empty() && is_blank(v.answer) && v.problem != "empty answer")
      v.problem = "empty answer (reasoning only): " + v.problem;
  } catch (const std::exception& e) {
    v.problem = e.what();
  }
  return v;
}

int run_canary(const CanaryArgs& a) {
  const bench::BaseUrl base = bench::parse_base_url(a.url);
  bench::HeaderMap headers;
  if (!a.api_key.empty()) headers["Authorization"] = "Bearer " + a.api_key;
  const std::string model = a.model.empty() ? first_model(base, headers) : a.model;
  std::vector<Verdict> verdicts;
  const auto checks = canary_checks();
  for (bool thinking : {false, true}) {
    const char* mode = thinking ? "thinking on" : "thinking off";
    for (const auto& c : checks) verdicts.push_back(ask(base, headers, a, model, c, thinking, fmt::format("{} ({}, alone)", c.name, mode)));
    // Under load: every check `concurrency` times at once.
    std::vector<Verdict> batch(checks.size() * static_cast<size_t>(a.concurrency));
    std::vector<std::thread> threads;
    for (size_t i = 0; i < batch.size(); ++i) {
      threads.emplace_back([&, i] {
        const auto& c = checks[i % checks.size()];
        batch[i] = ask(base, headers, a, model, c, thinking,
                       fmt::format("{} ({}, in a batch of {})", c.name, mode, batch.size()));
      });
    }
    for (auto& t : threads) t.join();
    for (size_t k = 0; k < checks.size(); ++k) {
      // One verdict per check and mode: the first failing copy, else a pass.
      Verdict v = batch[k];
      for (size_t i = k; i < batch.size(); i += checks.size())
        if (!batch[i].problem.empty()) {
          v = batch[i];
          break;
        }
      verdicts.push_back(v);
    }
  }
  int failed = 0;
  for (const auto& v : verdicts) {
    if (v.problem.empty()) {
      std::printf("PASS %s\n", v.label.c_str());
    } else {
      ++failed;
      const std::string shown = answer_preview(v.answer);
      if (is_blank(v.answer)) {
        std::printf("FAIL %s: %s; the answer was empty\n", v.label.c_str(), v.problem.c_str());
      } else {
        std::printf("FAIL %s: %s; answer: \"%s\"\n", v.label.c_str(), v.problem.c_str(), shown.c_str());
      }
    }
  }
  std::printf("canary: %zu checks, %d failed (%s at %s)\n", verdicts.size(), failed, model.c_str(), a.url.c_str());
  return failed == 0 ? 0 : 1;
}

}  // namespace

void register_canary(CLI::App& app) {
  auto a = std::make_shared<CanaryArgs>();
  auto* cmd = app.add_subcommand("canary", "correctness canary against a running server: exit 0 when every check passes");
  cmd->add_option("URL", a->url, "server base URL, e.g. http://localhost:8000")->required();
  cmd->add_option("--model", a->model, "model name (default: the first of /v1/models)");
  cmd->add_option("--api-key", a->api_key, "bearer key for /v1 routes");
  cmd->add_option("--concurrency", a->concurrency, "copies of each check sent at once in the batch round")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--max-tokens", a->max_tokens, "answer budget with thinking off")->check(CLI::PositiveNumber);
  cmd->add_option("--thinking-max-tokens", a->thinking_max_tokens, "answer budget with thinking on")
      ->check(CLI::PositiveNumber);
  cmd->callback([a] {
    const int rc = run_canary(*a);
    std::fflush(stdout);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace fp4serve::tools
