#include "tokenizer/chat_template/jinja_parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

namespace fp4serve::jinja {
namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const SourceMap& map, int max_nesting)
      : toks_(tokens), map_(map), max_nesting_(max_nesting) {}

  Body parse_all() {
    Body body = subparse({});
    if (cur().type != TokenType::Eof) fail("unexpected tag '" + cur().text + "'");
    return body;
  }

 private:
  // Guards recursion depth of the parser (and so of the evaluator, which walks the same tree).
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > p.max_nesting_) p.fail("template nested too deeply (limit " + std::to_string(p.max_nesting_) + ")");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // Left-associative chains (a + b + c, x.y.z, x|f|g) are built iteratively but nest in the tree;
  // each link counts as one level so that evaluating or destroying the tree stays shallow.
  struct ChainGuard {
    Parser& p;
    int links = 0;
    explicit ChainGuard(Parser& parser) : p(parser) {}
    void link() {
      ++links;
      if (++p.depth_ > p.max_nesting_) p.fail("expression nested too deeply (limit " + std::to_string(p.max_nesting_) + ")");
    }
    ~ChainGuard() { p.depth_ -= links; }
  };

  const Token& cur() const { return toks_[i_]; }
  const Token& peek(std::size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  SourcePos pos() const { return map_.pos(cur().offset); }
  void next() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  [[noreturn]] void fail(const std::string& msg) const { throw TemplateSyntaxError(msg, pos()); }

  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == TokenType::Name && cur().text == n; }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) fail("expected a name, got " + describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != TokenType::BlockEnd) fail("expected end of statement block, got " + describe(cur()));
    next();
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::Eof: return "end of template";
      case TokenType::BlockEnd: return "end of statement block";
      case TokenType::VarEnd: return "end of print statement";
      case TokenType::String: return "string";
      default: return "'" + t.text + "'";
    }
  }

  // Statements until a block tag whose name is in `ends`; leaves cur() at that name.
  Body subparse(std::initializer_list<const char*> ends) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::Eof) {
        if (ends.size()) fail(std::string("unexpected end of template, expected '") + *ends.begin() + "'");
        return body;
      }
      if (t.type == TokenType::Data) {
        body.push_back(std::make_unique<OutputStmt>(pos(), t.text));
        next();
      } else if (t.type == TokenType::VarBegin) {
        next();
        const SourcePos p = pos();
        auto e = parse_tuple(true, {});
        if (cur().type != TokenType::VarEnd) fail("expected end of print statement, got " + describe(cur()));
        next();
        body.push_back(std::make_unique<PrintStmt>(p, std::move(e)));
      } else if (t.type == TokenType::BlockBegin) {
        next();
        if (cur().type == TokenType::Name)
          for (const char* e : ends)
            if (cur().text == e) return body;
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement() {
    if (cur().type != TokenType::Name) fail("tag name expected");
    const std::string tag = cur().text;
    const SourcePos p = pos();
    if (tag == "if") return parse_if();
    if (tag == "for") return parse_for();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
      next();
      expect_block_end();
      return std::make_unique<Stmt>(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, p);
    }
    if (tag == "generation") {  // transformers' AssistantTracker tag: renders its body in place
      next();
      expect_block_end();
      auto s = std::make_unique<ScopeStmt>(p);
      s->body = subparse({"endgeneration"});
      next();
      expect_block_end();
      return s;
    }
    if (tag == "include" || tag == "import" || tag == "from" || tag == "extends")
      fail("'" + tag + "' is not available: the chat template sandbox has no file access");
    if (tag == "block" || tag == "call" || tag == "filter" || tag == "with" || tag == "autoescape" || tag == "do")
      fail("tag '" + tag + "' is not supported by this template engine");
    fail("Encountered unknown tag '" + tag + "'.");
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<IfStmt>(pos());
    next();
    while (true) {
      auto test = parse_tuple(false, {});
      expect_block_end();
      Body body = subparse({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(test), std::move(body));
      if (is_name("elif")) {
        next();
        continue;
      }
      if (is_name("else")) {
        next();
        expect_block_end();
        s->else_body = subparse({"endif"});
      }
      next();  // endif
      expect_block_end();
      return s;
    }
  }

  Target parse_target(bool with_namespace) {
    Target t;
    t.pos = pos();
    t.names.push_back(expect_name());
    if (with_namespace && is_op(".")) {
      next();
      t.attr = expect_name();
      return t;
    }
    while (is_op(",")) {
      next();
      if (cur().type != TokenType::Name || cur().text == "in") break;
      t.names.push_back(expect_name());
    }
    return t;
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<ForStmt>(pos());
    next();
    s->target = parse_target(false);
    if (!is_name("in")) fail("expected 'in', got " + describe(cur()));
    next();
    s->iter = parse_tuple(false, {"recursive"});
    if (is_name("if")) {
      next();
      s->filter = parse_expression(true);
    }
    if (is_name("recursive")) fail("recursive for loops are not supported by this template engine");
    expect_block_end();
    ++loop_depth_;
    s->body = subparse({"endfor", "else"});
    --loop_depth_;
    if (is_name("else")) {
      next();
      expect_block_end();
      s->else_body = subparse({"endfor"});
    }
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_set() {
    const SourcePos p = pos();
    next();
    Target target = parse_target(true);
    if (is_op("=")) {
      next();
      auto s = std::make_unique<SetStmt>(p);
      s->target = std::move(target);
      s->value = parse_tuple(true, {});
      expect_block_end();
      return s;
    }
    auto s = std::make_unique<SetBlockStmt>(p);
    s->target = std::move(target);
    while (is_op("|")) {
      next();
      s->filters.push_back(parse_filter_tail(nullptr));
    }
    expect_block_end();
    s->body = subparse({"endset"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_macro() {
    auto s = std::make_unique<MacroStmt>(pos());
    next();
    s->name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string name = expect_name();
      ExprPtr def;
      if (is_op("=")) {
        next();
        def = parse_expression(true);
      }
      s->params.emplace_back(std::move(name), std::move(def));
    }
    next();
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = subparse({"endmacro"});
    loop_depth_ = saved;
    next();
    if (cur().type == TokenType::Name && cur().text == s->name) next();
    expect_block_end();
    return s;
  }

  // --- expressions ----------------------------------------------------------------------------

  bool is_tuple_end(std::initializer_list<const char*> extra) const {
    const Token& t = cur();
    if (t.type == TokenType::VarEnd || t.type == TokenType::BlockEnd || t.type == TokenType::Eof) return true;
    if (t.type == TokenType::Operator && t.text == ")") return true;
    if (t.type == TokenType::Name)
      for (const char* e : extra)
        if (t.text == e) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra, bool explicit_parens = false) {
    const SourcePos p = pos();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("Expected an expression, got " + describe(cur()));
    }
    auto l = std::make_unique<ListExpr>(p, true);
    l->items = std::move(items);
    return l;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    if (!with_condexpr) return parse_or();
    const SourcePos p = pos();
    ExprPtr e = parse_or();
    ChainGuard chain(*this);
    while (is_name("if")) {
      chain.link();
      next();
      auto c = std::make_unique<CondExpr>(p);
      c->test = parse_or();
      if (is_name("else")) {
        next();
        c->no = parse_expression(true);
      }
      c->yes = std::move(e);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    ChainGuard chain(*this);
    while (is_name("or")) {
      chain.link();
      const SourcePos p = pos();
      next();
      l = std::make_unique<BinaryExpr>(Expr::Kind::Or, p, "or", std::move(l), parse_and());
    }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    ChainGuard chain(*this);
    while (is_name("and")) {
      chain.link();
      const SourcePos p = pos();
      next();
      l = std::make_unique<BinaryExpr>(Expr::Kind::And, p, "and", std::move(l), parse_not());
    }
    return l;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      const SourcePos p = pos();
      next();
      return std::make_unique<UnaryExpr>(Expr::Kind::Not, p, parse_not());
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    const SourcePos p = pos();
    ExprPtr first = parse_math1();
    std::unique_ptr<CompareExpr> cmp;
    ChainGuard chain(*this);
    while (true) {
      std::string op;
      if (cur().type == TokenType::Operator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      chain.link();
      if (!cmp) {
        cmp = std::make_unique<CompareExpr>(p);
        cmp->first = std::move(first);
      }
      cmp->rest.emplace_back(op, parse_math1());
    }
    if (cmp) return cmp;
    return first;
  }
  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    ChainGuard chain(*this);
    while (is_op("+") || is_op("-")) {
      chain.link();
      const SourcePos p = pos();
      std::string op = cur().text;
      next();
      l = std::make_unique<BinaryExpr>(Expr::Kind::Binary, p, op, std::move(l), parse_concat());
    }
    return l;
  }
  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    ChainGuard chain(*this);
    while (is_op("~")) {
      chain.link();
      const SourcePos p = pos();
      next();
      l = std::make_unique<BinaryExpr>(Expr::Kind::Binary, p, "~", std::move(l), parse_math2());
    }
    return l;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    ChainGuard chain(*this);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.link();
      const SourcePos p = pos();
      std::string op = cur().text;
      next();
      l = std::make_unique<BinaryExpr>(Expr::Kind::Binary, p, op, std::move(l), parse_pow());
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    ChainGuard chain(*this);
    while (is_op("**")) {
      chain.link();
      const SourcePos p = pos();
      next();
      l = std::make_unique<BinaryExpr>(Expr::Kind::Binary, p, "**", std::move(l), parse_unary(true));
    }
    return l;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    const SourcePos p = pos();
    ExprPtr node;
    if (is_op("-")) {
      next();
      node = std::make_unique<UnaryExpr>(Expr::Kind::Neg, p, parse_unary(false));
    } else if (is_op("+")) {
      next();
      node = std::make_unique<UnaryExpr>(Expr::Kind::Pos, p, parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const SourcePos p = pos();
    switch (t.type) {
      case TokenType::Name: {
        const std::string& n = t.text;
        ExprPtr e;
        if (n == "true" || n == "True") e = std::make_unique<ConstExpr>(p, Value::boolean(true));
        else if (n == "false" || n == "False") e = std::make_unique<ConstExpr>(p, Value::boolean(false));
        else if (n == "none" || n == "None") e = std::make_unique<ConstExpr>(p, Value::none());
        else e = std::make_unique<NameExpr>(p, n);
        next();
        return e;
      }
      case TokenType::String: {
        std::string s = t.text;
        next();
        while (cur().type == TokenType::String) {  // adjacent literals concatenate
          s += cur().text;
          next();
        }
        return std::make_unique<ConstExpr>(p, Value::string(std::move(s)));
      }
      case TokenType::Integer: {
        std::int64_t v = 0;
        const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (r.ec != std::errc()) fail("integer literal out of range");
        next();
        return std::make_unique<ConstExpr>(p, Value::integer(v));
      }
      case TokenType::Float: {
        const double d = std::strtod(t.text.c_str(), nullptr);
        next();
        return std::make_unique<ConstExpr>(p, Value::number(d));
      }
      case TokenType::Operator:
        if (t.text == "(") {
          next();
          auto e = parse_tuple(true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          next();
          auto l = std::make_unique<ListExpr>(p);
          while (!is_op("]")) {
            if (!l->items.empty()) expect_op(",");
            if (is_op("]")) break;
            l->items.push_back(parse_expression(true));
          }
          next();
          return l;
        }
        if (t.text == "{") {
          next();
          auto d = std::make_unique<DictExpr>(p);
          while (!is_op("}")) {
            if (!d->items.empty()) expect_op(",");
            if (is_op("}")) break;
            auto k = parse_expression(true);
            expect_op(":");
            auto v = parse_expression(true);
            d->items.emplace_back(std::move(k), std::move(v));
          }
          next();
          return d;
        }
        [[fallthrough]];
      default:
        fail("unexpected " + describe(t));
    }
  }

  ExprPtr parse_postfix(ExprPtr node) {
    ChainGuard chain(*this);
    while (true) {
      const SourcePos p = pos();
      if (is_op(".") || is_op("[") || is_op("(")) chain.link();
      if (is_op(".")) {
        next();
        if (cur().type == TokenType::Name) {
          node = std::make_unique<AttrExpr>(p, std::move(node), cur().text);
          next();
        } else if (cur().type == TokenType::Integer) {
          // `x.0` is x[0]. from_chars, not stoll: a literal past int64 is a template error, not an
          // std::out_of_range escaping the parser (found by jinja_template_fuzz).
          std::int64_t index = 0;
          const std::string& text = cur().text;
          if (std::from_chars(text.data(), text.data() + text.size(), index).ec != std::errc()) {
            fail("integer literal out of range");
          }
          node = std::make_unique<ItemExpr>(p, std::move(node), std::make_unique<ConstExpr>(p, Value::integer(index)));
          next();
        } else {
          fail("expected name or number after '.'");
        }
      } else if (is_op("[")) {
        next();
        node = parse_subscript(std::move(node), p);
      } else if (is_op("(")) {
        auto c = std::make_unique<CallExpr>(node->pos);  // errors point at the callee
        c->callee = std::move(node);
        c->args = parse_call_args();
        node = std::move(c);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, SourcePos p) {
    ExprPtr parts[3];
    int part = 0;
    bool is_slice = false;
    while (!is_op("]")) {
      if (is_op(":")) {
        is_slice = true;
        if (++part > 2) fail("invalid slice");
        next();
        continue;
      }
      if (parts[part]) fail("expected ']' or ':', got " + describe(cur()));
      parts[part] = parse_expression(true);
      if (is_op(",")) fail("tuple subscripts are not supported");
    }
    next();
    if (!is_slice) {
      if (!parts[0]) fail("expected a subscript expression");
      return std::make_unique<ItemExpr>(p, std::move(obj), std::move(parts[0]));
    }
    auto s = std::make_unique<SliceExpr>(p);
    s->obj = std::move(obj);
    s->start = std::move(parts[0]);
    s->stop = std::move(parts[1]);
    s->step = std::move(parts[2]);
    return s;
  }

  ArgList parse_call_args() {
    expect_op("(");
    ArgList a;
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) fail("*args / **kwargs in calls are not supported");
      if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        a.keyword.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!a.keyword.empty()) fail("positional argument follows keyword argument");
        a.positional.push_back(parse_expression(true));
      }
    }
    next();
    return a;
  }

  std::unique_ptr<FilterExpr> parse_filter_tail(ExprPtr arg) {
    auto f = std::make_unique<FilterExpr>(pos());
    f->arg = std::move(arg);
    f->name = expect_name();
    while (is_op(".")) {
      next();
      f->name += "." + expect_name();
    }
    if (is_op("(")) f->args = parse_call_args();
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    ChainGuard chain(*this);
    while (true) {
      if (is_op("|") || is_name("is") || is_op("(")) chain.link();
      if (is_op("|")) {
        next();
        node = parse_filter_tail(std::move(node));
      } else if (is_name("is")) {
        auto t = std::make_unique<TestExpr>(pos());
        next();
        if (is_name("not")) {
          t->negated = true;
          next();
        }
        t->name = expect_name();
        t->arg = std::move(node);
        if (is_op("(")) {
          t->args = parse_call_args();
        } else if ((cur().type == TokenType::Name || cur().type == TokenType::String ||
                    cur().type == TokenType::Integer || cur().type == TokenType::Float || is_op("[") ||
                    is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail("You cannot chain multiple tests with is");
          t->args.positional.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(t);
      } else if (is_op("(")) {
        auto c = std::make_unique<CallExpr>(node->pos);  // errors point at the callee
        c->callee = std::move(node);
        c->args = parse_call_args();
        node = std::move(c);
      } else {
        return node;
      }
    }
  }

  const std::vector<Token>& toks_;
  const SourceMap& map_;
  int max_nesting_;
  std::size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens, const SourceMap& map, int max_nesting) {
  Body body = Parser(tokens, map, max_nesting).parse_all();
  check_filter_and_test_names(body);
  return body;
}

}  // namespace fp4serve::jinja
