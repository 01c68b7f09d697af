// The grammar side of structured output on a hand-made vocabulary: what xgrammar compiles from each
// kind of constraint, the masks a sequence's state hands out (reasoning first, then the grammar),
// verify rows over drafts, dead ends, and the compile cache.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/structured/grammar_builder.h"
#include "engine/structured/grammar_compiler.h"
#include "engine/structured/structured_output_state.h"

namespace fp4serve::engine {
namespace {

// Printable ASCII one byte per token (ids 0..94), a few merged tokens, "<think>", "</think>" and
// an end-of-sequence token; the logits row is padded past the vocabulary.
struct Vocab {
  std::vector<std::string> tokens;
  std::int32_t think = -1, end_think = -1, eos = -1;
  int logits = 0;
  Vocab() {
    for (char c = ' '; c <= '~'; ++c) tokens.emplace_back(1, c);
    for (const char* t : {"\"name\"", "true", "false", "\n", "  ", "\x01x", "\t"}) tokens.emplace_back(t);
    think = static_cast<std::int32_t>(tokens.size());
    tokens.emplace_back("<think>");
    end_think = static_cast<std::int32_t>(tokens.size());
    tokens.emplace_back("</think>");
    eos = static_cast<std::int32_t>(tokens.size());
    tokens.emplace_back("<eos>");
    logits = static_cast<int>(tokens.size()) + 29;  // padding, as Qwen's lm_head has
  }
  std::int32_t id(char c) const { return c - ' '; }
  GrammarVocabulary grammar_vocabulary(bool drop_z = false) const {
    GrammarVocabulary v{tokens, logits, {eos}};
    if (drop_z) v.token_bytes[static_cast<std::size_t>(id('z'))] = "\x01";  // no token spells "z"
    return v;
  }
};

const Vocab& vocab() {
  static const Vocab v;
  return v;
}

bool allowed(std::span<const std::int32_t> mask, std::int32_t token) {
  return (static_cast<std::uint32_t>(mask[static_cast<std::size_t>(token) / 32]) >> (token % 32)) & 1u;
}

std::shared_ptr<const xgrammar::CompiledGrammar> compile(const StructuredOutputsParams& p, bool drop_z = false) {
  GrammarCompiler compiler([drop_z] { return vocab().grammar_vocabulary(drop_z); }, 8);
  const CompiledConstraint c = compiler.compile(p).get();
  EXPECT_TRUE(c.grammar) << c.error;
  return c.grammar;
}

StructuredOutputsParams params(StructuredOutputsParams::Kind kind, std::string spec) {
  StructuredOutputsParams p;
  p.kind = kind;
  p.spec = std::move(spec);
  return p;
}

// Drives a state to the end, always taking the highest allowed id that is neither whitespace nor the
// end token unless nothing else is left (a "model" that never wants to stop, and that would loop on
// whitespace forever were it allowed to pick it: JSON admits any amount); returns the text.
std::string walk(StructuredOutputState& st, std::vector<std::int32_t>& out, int max_tokens = 200) {
  std::string text;
  for (int i = 0; i < max_tokens && st.constrained(); ++i) {
    std::int32_t pick = -1;
    for (std::int32_t t = static_cast<std::int32_t>(vocab().tokens.size()) - 1; t >= 0; --t) {
      const std::string& tok = vocab().tokens[static_cast<std::size_t>(t)];
      const bool blank = tok.find_first_not_of(" \n\t") == std::string::npos;
      if (allowed(st.mask(), t) && t != vocab().eos && !blank) {
        pick = t;
        break;
      }
    }
    if (pick < 0) pick = vocab().eos;
    EXPECT_TRUE(allowed(st.mask(), pick));
    out.push_back(pick);
    if (pick != vocab().eos) text += vocab().tokens[static_cast<std::size_t>(pick)];
    EXPECT_EQ(st.advance(out), StructuredOutputState::Progress::kOk);
  }
  return text;
}

TEST(StructuredOutputState, AJsonSchemaWalkEndsInValidJsonAndThenOnlyTheStopTokenIsAllowed) {
  auto g = compile(params(StructuredOutputsParams::Kind::kJson,
                          R"({"type":"object","properties":{"ok":{"type":"boolean"},"n":{"enum":[1,2]}},)"
                          R"("required":["ok","n"],"additionalProperties":false})"));
  StructuredOutputState st(g, vocab().logits, {}, false);
  ASSERT_TRUE(st.constrained());
  std::vector<std::int32_t> out;
  const std::string text = walk(st, out);
  ASSERT_FALSE(st.constrained()) << "the walk ends with the stop token: " << text;
  EXPECT_EQ(out.back(), vocab().eos);
  const auto j = nlohmann::json::parse(text);
  EXPECT_TRUE(j.at("ok").is_boolean());
  EXPECT_TRUE(j.at("n") == 1 || j.at("n") == 2);
  EXPECT_EQ(j.size(), 2u);
}

TEST(StructuredOutputState, ChoiceRegexAndGrammarAdmitExactlyTheirLanguage) {
  StructuredOutputsParams choice = params(StructuredOutputsParams::Kind::kChoice, "");
  choice.choice = {"yes", "no \"quoted\""};
  {
    StructuredOutputState st(compile(choice), vocab().logits, {}, false);
    std::vector<std::int32_t> out;
    const std::string text = walk(st, out);
    EXPECT_TRUE(text == "yes" || text == "no \"quoted\"") << text;
  }
  {
    StructuredOutputState st(compile(params(StructuredOutputsParams::Kind::kRegex, "[0-9]{3}-[a-c]+")), vocab().logits,
                             {}, false);
    EXPECT_TRUE(allowed(st.mask(), vocab().id('7')));
    EXPECT_FALSE(allowed(st.mask(), vocab().id('a')));
    EXPECT_FALSE(allowed(st.mask(), vocab().eos)) << "the regex is not complete yet";
  }
  {
    StructuredOutputState st(compile(params(StructuredOutputsParams::Kind::kGrammar, R"(root ::= "a" ("b" | "c"))")),
                             vocab().logits, {}, false);
    std::vector<std::int32_t> out{vocab().id('a')};
    ASSERT_EQ(st.advance(out), StructuredOutputState::Progress::kOk);
    EXPECT_TRUE(allowed(st.mask(), vocab().id('b')));
    EXPECT_TRUE(allowed(st.mask(), vocab().id('c')));
    EXPECT_FALSE(allowed(st.mask(), vocab().id('a')));
    out.push_back(vocab().id('a'));
    EXPECT_EQ(st.advance(out), StructuredOutputState::Progress::kRejected);
  }
}

TEST(StructuredOutputState, JsonNeverAdmitsARawControlCharacterEvenWhereXgrammarWould) {
  // xgrammar 0.2.9's bounded strings admit raw control bytes; the compiler's JSON filter removes them.
  GrammarCompiler compiler([] { return vocab().grammar_vocabulary(); }, 4);
  const CompiledConstraint c =
      compiler.compile(params(StructuredOutputsParams::Kind::kJson, R"({"type":"string","maxLength":8})")).get();
  ASSERT_TRUE(c.grammar && c.token_filter);
  const auto control = static_cast<std::int32_t>(vocab().tokens.size() - 5);  // "\x01x"
  const auto tab = control + 1;
  ASSERT_EQ(vocab().tokens[static_cast<std::size_t>(control)], "\x01x");
  StructuredOutputState unfiltered(c.grammar, vocab().logits, {}, false);
  StructuredOutputState filtered(c.grammar, vocab().logits, {}, false, c.token_filter);
  std::vector<std::int32_t> out{vocab().id('"')};
  ASSERT_EQ(unfiltered.advance(out), StructuredOutputState::Progress::kOk);
  ASSERT_EQ(filtered.advance(out), StructuredOutputState::Progress::kOk);
  EXPECT_TRUE(allowed(unfiltered.mask(), control)) << "xgrammar's own mask (if this fails, xgrammar was fixed)";
  EXPECT_FALSE(allowed(filtered.mask(), control));
  EXPECT_FALSE(allowed(filtered.mask(), tab));
  EXPECT_TRUE(allowed(filtered.mask(), vocab().id('a')));
}

TEST(StructuredOutputState, PaddingIdsAndTokensPastTheVocabularyAreNeverAllowed) {
  StructuredOutputState st(compile(params(StructuredOutputsParams::Kind::kJsonObject, "")), vocab().logits, {}, false);
  for (int t = static_cast<int>(vocab().tokens.size()); t < vocab().logits; ++t) EXPECT_FALSE(allowed(st.mask(), t));
  EXPECT_TRUE(allowed(st.mask(), vocab().id('{')));
  EXPECT_FALSE(allowed(st.mask(), vocab().id('[')));
}

TEST(StructuredOutputState, TheReasoningIsFreeAndTheGrammarStartsAfterItsEndMarker) {
  auto g = compile(params(StructuredOutputsParams::Kind::kRegex, "ok"));
  StructuredOutputState st(g, vocab().logits, {vocab().end_think}, /*prompt_in_reasoning=*/true);
  EXPECT_FALSE(st.constrained());
  std::vector<std::int32_t> out{vocab().id('x'), vocab().id('y')};
  ASSERT_EQ(st.advance(out), StructuredOutputState::Progress::kOk);
  EXPECT_FALSE(st.constrained()) << "still reasoning";
  out.push_back(vocab().end_think);
  ASSERT_EQ(st.advance(out), StructuredOutputState::Progress::kOk);
  ASSERT_TRUE(st.constrained()) << "the end marker starts the grammar";
  EXPECT_TRUE(allowed(st.mask(), vocab().id('o')));
  EXPECT_FALSE(allowed(st.mask(), vocab().id('x')));

  // A prompt that closed its reasoning (thinking off) is constrained from the first token.
  StructuredOutputState closed(g, vocab().logits, {vocab().end_think}, /*prompt_in_reasoning=*/false);
  EXPECT_TRUE(closed.constrained());
}

TEST(StructuredOutputState, VerifyRowsFollowTheDraftsAndLeaveTheMatcherWhereItWas) {
  auto g = compile(params(StructuredOutputsParams::Kind::kRegex, "abc[0-9]"));
  StructuredOutputState st(g, vocab().logits, {}, false);
  const std::vector<std::int32_t> before(st.mask().begin(), st.mask().end());
  const std::vector<std::int32_t> drafts{vocab().id('a'), vocab().id('b'), vocab().id('x'), vocab().id('c')};
  EXPECT_EQ(st.valid_draft_prefix({}, drafts), 2u) << "'x' is refused: the drafts are cut before it";
  std::vector<std::int32_t> row(bitmask_words(vocab().logits));
  ASSERT_TRUE(st.mask_after({}, std::span(drafts).first(2), row));
  EXPECT_TRUE(allowed(row, vocab().id('c')));
  EXPECT_FALSE(allowed(row, vocab().id('a')));
  EXPECT_EQ(std::vector<std::int32_t>(st.mask().begin(), st.mask().end()), before);
  std::vector<std::int32_t> out{vocab().id('a')};
  ASSERT_EQ(st.advance(out), StructuredOutputState::Progress::kOk) << "rolled back: 'a' is still next";
  // Drafts during the reasoning are free, and the end marker among them starts the grammar.
  StructuredOutputState thinking(g, vocab().logits, {vocab().end_think}, true);
  const std::vector<std::int32_t> d2{vocab().id('q'), vocab().end_think, vocab().id('a'), vocab().id('q')};
  EXPECT_EQ(thinking.valid_draft_prefix({}, d2), 3u);
  EXPECT_FALSE(thinking.mask_after({}, std::span(d2).first(1), row)) << "still reasoning at row 1";
  ASSERT_TRUE(thinking.mask_after({}, std::span(d2).first(3), row));
  EXPECT_TRUE(allowed(row, vocab().id('b')));
}

TEST(StructuredOutputState, AGrammarNoTokenCanContinueIsADeadEnd) {
  // "z" is in the grammar but no token of this vocabulary spells it.
  auto g = compile(params(StructuredOutputsParams::Kind::kGrammar, R"(root ::= "a" "z")"), /*drop_z=*/true);
  StructuredOutputState st(g, vocab().logits, {}, false);
  std::vector<std::int32_t> out{vocab().id('a')};
  EXPECT_EQ(st.advance(out), StructuredOutputState::Progress::kDeadEnd);
}

TEST(GrammarCompiler, CompilesEachConstraintOnceAndReportsBadOnesWithTheirReason) {
  GrammarCompiler compiler([] { return vocab().grammar_vocabulary(); }, 2);
  const auto schema = params(StructuredOutputsParams::Kind::kJson, R"({"type":"string"})");
  CompileFuture a = compiler.compile(schema);
  CompileFuture b = compiler.compile(schema);
  ASSERT_TRUE(a.get().grammar);
  EXPECT_EQ(a.get().grammar, b.get().grammar);
  EXPECT_EQ(compiler.compilations(), 1u);

  auto other = schema;
  other.disable_any_whitespace = true;
  ASSERT_TRUE(compiler.compile(other).get().grammar);
  EXPECT_EQ(compiler.compilations(), 2u) << "options are part of the key";
  ASSERT_TRUE(compiler.compile(params(StructuredOutputsParams::Kind::kRegex, "a+")).get().grammar);
  EXPECT_EQ(compiler.cached_entries(), 2u) << "LRU capacity 2";
  ASSERT_TRUE(compiler.compile(schema).get().grammar);
  EXPECT_EQ(compiler.compilations(), 4u) << "the oldest entry was evicted";

  const CompiledConstraint bad = compiler.compile(params(StructuredOutputsParams::Kind::kRegex, "(unclosed")).get();
  EXPECT_FALSE(bad.grammar);
  EXPECT_NE(bad.error.find("Failed to transform regex into a grammar: "), std::string::npos) << bad.error;
}

TEST(StructuredOutputsError, NamesTheKindAndTheProblemWithoutATokenizer) {
  EXPECT_FALSE(structured_outputs_error(params(StructuredOutputsParams::Kind::kJson, R"({"type":"object"})")));
  const auto bad_json = structured_outputs_error(params(StructuredOutputsParams::Kind::kJson, "{not json"));
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(*bad_json, "Invalid JSON grammar specification.");
  const auto unsupported = structured_outputs_error(
      params(StructuredOutputsParams::Kind::kJson, R"({"type":"array","items":{"type":"integer"},"uniqueItems":true})"));
  ASSERT_TRUE(unsupported);
  EXPECT_EQ(*unsupported, "The provided JSON schema contains features not supported by xgrammar.");
  const auto nul = structured_outputs_error(params(StructuredOutputsParams::Kind::kRegex, std::string("a\0b", 3)));
  ASSERT_TRUE(nul);
  EXPECT_NE(nul->find("NUL"), std::string::npos);
  EXPECT_TRUE(structured_outputs_error(params(StructuredOutputsParams::Kind::kRegex, std::string(100000, '('))));
  EXPECT_TRUE(structured_outputs_error(params(StructuredOutputsParams::Kind::kGrammar, "root ::= ")));
  EXPECT_TRUE(structured_outputs_error(params(StructuredOutputsParams::Kind::kRegex, "a{2,1}")));
  EXPECT_TRUE(structured_outputs_error(params(StructuredOutputsParams::Kind::kChoice, "")));
  EXPECT_EQ(choice_grammar({"a\"b", "c\\d\n"}), R"(root ::= "a\"b" | "c\\d\n")");
  // xgrammar's log prefix (time, source path) never reaches the client.
  const auto bad_regex = structured_outputs_error(params(StructuredOutputsParams::Kind::kRegex, "((("));
  ASSERT_TRUE(bad_regex);
  EXPECT_EQ(bad_regex->find(".cc:"), std::string::npos) << *bad_regex;
  EXPECT_EQ(bad_regex->find('['), std::string::npos) << *bad_regex;
}

TEST(StructuredOutputsError, ADeeplyNestedSchemaIsRefusedBeforeXgrammarSpendsSecondsOnIt) {
  auto nested = [](int levels) {
    std::string s;
    for (int i = 0; i < levels; ++i) s += R"({"type":"object","properties":{"a":)";
    s += R"({"type":"string","description":"[[[{{{"})";  // brackets inside strings do not count
    for (int i = 0; i < levels; ++i) s += "}}";
    return s;
  };
  EXPECT_FALSE(structured_outputs_error(params(StructuredOutputsParams::Kind::kJson, nested(20))));
  const auto t0 = std::chrono::steady_clock::now();
  const auto deep = structured_outputs_error(params(StructuredOutputsParams::Kind::kJson, nested(400)));
  ASSERT_TRUE(deep);
  EXPECT_NE(deep->find("nested 801 levels deep"), std::string::npos) << *deep;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

}  // namespace
}  // namespace fp4serve::engine
