// Tree-walking renderer for the parsed template, with jinja2's scoping rules:
//  - `for` bodies get a fresh scope per iteration (assignments inside do not leak out, and each
//    iteration starts again from the enclosing values);
//  - `if` does not open a scope;
//  - macros run in a scope whose parent is where they were defined (they see top-level variables as
//    they are at call time, never the caller's loop variables);
//  - namespaces are shared objects, so `set ns.x = ...` is the one way to carry state out of a loop.
#include <cmath>
#include <cstdint>
#include <unordered_map>

#include "tokenizer/chat_template/jinja_builtins.h"
#include "tokenizer/chat_template/jinja_lexer.h"
#include "tokenizer/chat_template/jinja_parser.h"
#include "tokenizer/chat_template/jinja_template.h"
#include "tokenizer/chat_template/jinja_unicode.h"

namespace fp4serve::jinja {
namespace {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { Normal, Break, Continue };

class Evaluator {
 public:
  explicit Evaluator(const TemplateLimits& limits) : limits_(limits) {}

  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    const DepthGuard guard(*this, body.empty() ? SourcePos{} : body.front()->pos);
    for (const auto& st : body) {
      const Flow f = exec_stmt(*st, scope, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

 private:
  // Bounds the C++ stack used by nested evaluation (expressions inside blocks inside recursive
  // macro calls) independently of how the nesting came about.
  struct DepthGuard {
    Evaluator& ev;
    DepthGuard(Evaluator& e, SourcePos pos) : ev(e) {
      if (++ev.eval_depth_ > ev.limits_.max_eval_depth) {
        --ev.eval_depth_;
        throw TemplateLimitError("evaluation nested deeper than " + std::to_string(ev.limits_.max_eval_depth) + " levels", pos);
      }
    }
    ~DepthGuard() { --ev.eval_depth_; }
  };

  void append(std::string& out, const std::string& text, SourcePos pos) const {
    if (out.size() + text.size() > limits_.max_output_bytes)
      throw TemplateLimitError("output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes", pos);
    out += text;
  }
  void check_size(const Value& v, SourcePos pos) const {
    if (v.is_string() && v.str().size() > limits_.max_output_bytes)
      throw TemplateLimitError("string exceeds " + std::to_string(limits_.max_output_bytes) + " bytes", pos);
  }
  void count_iteration(SourcePos pos) {
    if (++iterations_ > limits_.max_loop_iterations)
      throw TemplateLimitError("more than " + std::to_string(limits_.max_loop_iterations) + " loop iterations", pos);
  }

  Flow exec_stmt(const Stmt& st, const ScopePtr& scope, std::string& out) {
    switch (st.kind) {
      case Stmt::Kind::Output: append(out, static_cast<const OutputStmt&>(st).text, st.pos); return Flow::Normal;
      case Stmt::Kind::Print: {
        const auto& p = static_cast<const PrintStmt&>(st);
        append(out, py_str(eval(*p.expr, scope)), st.pos);
        return Flow::Normal;
      }
      case Stmt::Kind::If: {
        const auto& s = static_cast<const IfStmt&>(st);
        for (const auto& [test, body] : s.branches)
          if (truthy(eval(*test, scope))) return exec(body, scope, out);
        return exec(s.else_body, scope, out);
      }
      case Stmt::Kind::For: return exec_for(static_cast<const ForStmt&>(st), scope, out);
      case Stmt::Kind::Set: {
        const auto& s = static_cast<const SetStmt&>(st);
        Value v = eval(*s.value, scope);
        try {
          assign(s.target, std::move(v), scope);  // storing into a namespace re-checks its nesting
        } catch (const TemplateLimitError& err) {
          if (err.pos().line == 0) throw TemplateLimitError(err.message(), st.pos);
          throw;
        }
        return Flow::Normal;
      }
      case Stmt::Kind::SetBlock: {
        const auto& s = static_cast<const SetBlockStmt&>(st);
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        std::string captured;
        exec(s.body, inner, captured);
        Value v = Value::string(std::move(captured));
        for (const auto& f : s.filters) v = apply_filter_expr(*f, v, scope);
        assign(s.target, std::move(v), scope);
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: {
        const auto& m = static_cast<const MacroStmt&>(st);
        scope->vars[m.name] = make_macro(m, scope);
        return Flow::Normal;
      }
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
      case Stmt::Kind::Scope: return exec(static_cast<const ScopeStmt&>(st).body, scope, out);
    }
    return Flow::Normal;
  }

  void assign(const Target& t, Value v, const ScopePtr& scope) {
    if (!t.attr.empty()) {
      const Value* ns = scope->find(t.names[0]);
      if (!ns || !ns->is_namespace())
        throw TemplateRuntimeError("cannot assign attribute on non-namespace object", t.pos);
      // A namespace is the only mutable object; refusing to store namespaces inside one keeps
      // every value acyclic (jinja2 would allow it, no chat template needs it).
      if (v.holds_namespace())
        throw TemplateRuntimeError("cannot store a namespace (or a list/dict holding one) in a namespace attribute", t.pos);
      Value target = *ns;  // shares the namespace's storage
      target.map_mut().set(t.attr, std::move(v));
      return;
    }
    if (t.names.size() == 1) {
      scope->vars[t.names[0]] = std::move(v);
      return;
    }
    const std::vector<Value> parts = iterate(v, t.pos);
    if (parts.size() != t.names.size())
      throw TemplateRuntimeError(parts.size() < t.names.size()
                                     ? "not enough values to unpack (expected " + std::to_string(t.names.size()) +
                                           ", got " + std::to_string(parts.size()) + ")"
                                     : "too many values to unpack (expected " + std::to_string(t.names.size()) + ")",
                                 t.pos);
    for (std::size_t i = 0; i < parts.size(); ++i) scope->vars[t.names[i]] = parts[i];
  }

  Flow exec_for(const ForStmt& s, const ScopePtr& scope, std::string& out) {
    std::vector<Value> items = iterate(eval(*s.iter, scope), s.iter->pos);
    if (s.filter) {
      std::vector<Value> kept;
      for (auto& item : items) {
        count_iteration(s.pos);
        auto probe = std::make_shared<Scope>();
        probe->parent = scope;
        assign(s.target, item, probe);
        if (truthy(eval(*s.filter, probe))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(s.else_body, scope, out);
    const auto n = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < n; ++i) {
      count_iteration(s.pos);
      auto iter_scope = std::make_shared<Scope>();
      iter_scope->parent = scope;
      assign(s.target, items[static_cast<std::size_t>(i)], iter_scope);
      iter_scope->vars["loop"] = make_loop(items, i);
      const Flow f = exec(s.body, iter_scope, out);
      if (f == Flow::Break) break;
    }
    return Flow::Normal;
  }

  static Value make_loop(const std::vector<Value>& items, std::int64_t i) {
    const auto n = static_cast<std::int64_t>(items.size());
    Dict d;
    d.items.reserve(12);
    d.items.emplace_back("index0", Value::integer(i));
    d.items.emplace_back("index", Value::integer(i + 1));
    d.items.emplace_back("revindex0", Value::integer(n - i - 1));
    d.items.emplace_back("revindex", Value::integer(n - i));
    d.items.emplace_back("first", Value::boolean(i == 0));
    d.items.emplace_back("last", Value::boolean(i == n - 1));
    d.items.emplace_back("length", Value::integer(n));
    d.items.emplace_back("depth", Value::integer(1));
    d.items.emplace_back("depth0", Value::integer(0));
    d.items.emplace_back("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)]
                                           : Value::undefined("there is no previous item"));
    d.items.emplace_back("nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)]
                                               : Value::undefined("there is no next item"));
    d.items.emplace_back("cycle", Value::callable("loop.cycle", [i](CallArgs& a) -> Value {
                           if (a.positional.empty()) throw TemplateRuntimeError("no items for cycling given", a.pos);
                           return a.positional[static_cast<std::size_t>(i) % a.positional.size()];
                         }));
    // The loop object is not a dict in jinja2 (`loop is mapping` is false), but templates only read
    // its attributes; a namespace gives attribute access without dict methods shadowing them.
    return Value::ns(std::move(d));
  }

  Value make_macro(const MacroStmt& m, const ScopePtr& def_scope) {
    std::weak_ptr<Scope> weak = def_scope;  // weak: the defining scope holds this value
    return Value::callable(m.name, [this, &m, weak](CallArgs& a) -> Value {
      ScopePtr parent = weak.lock();
      if (!parent) throw TemplateRuntimeError("macro '" + m.name + "' called after its scope ended", a.pos);
      if (a.positional.size() > m.params.size())
        throw TemplateRuntimeError("macro '" + m.name + "' takes not more than " + std::to_string(m.params.size()) +
                                       " argument(s)",
                                   a.pos);
      for (const auto& [k, v] : a.keyword) {
        bool known = false;
        for (const auto& p : m.params) known |= p.first == k;
        if (!known) throw TemplateRuntimeError("macro '" + m.name + "' takes no keyword argument '" + k + "'", a.pos);
      }
      if (++depth_ > limits_.max_recursion_depth) {
        --depth_;
        throw TemplateLimitError("macro recursion deeper than " + std::to_string(limits_.max_recursion_depth), a.pos);
      }
      struct DepthRestore {
        int& d;
        ~DepthRestore() { --d; }
      } restore{depth_};
      auto scope = std::make_shared<Scope>();
      scope->parent = parent;
      for (std::size_t i = 0; i < m.params.size(); ++i) {
        const auto& [name, def] = m.params[i];
        if (const Value* v = a.get(i, name.c_str())) scope->vars[name] = *v;
        else if (def) scope->vars[name] = eval(*def, scope);
        else scope->vars[name] = Value::undefined("parameter '" + name + "' was not provided");
      }
      scope->vars["varargs"] = Value::list();
      scope->vars["kwargs"] = Value::dict();
      std::string out;
      exec(m.body, scope, out);
      return Value::string(std::move(out));
    });
  }

  CallArgs eval_args(const ArgList& args, const ScopePtr& scope, SourcePos pos) {
    CallArgs a;
    a.pos = pos;
    a.positional.reserve(args.positional.size());
    for (const auto& e : args.positional) a.positional.push_back(eval(*e, scope));
    for (const auto& [k, e] : args.keyword) a.keyword.emplace_back(k, eval(*e, scope));
    return a;
  }

  Value apply_filter_expr(const FilterExpr& f, const Value& input, const ScopePtr& scope) {
    CallArgs a = eval_args(f.args, scope, f.pos);
    Value out;
    if (!apply_filter(f.name, input, a, &out)) throw TemplateRuntimeError("No filter named '" + f.name + "'.", f.pos);
    check_size(out, f.pos);
    return out;
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    const DepthGuard guard(*this, e.pos);
    try {
      return eval_node(e, scope);
    } catch (const TemplateLimitError& err) {  // raised where no position was known (value nesting)
      if (err.pos().line == 0) throw TemplateLimitError(err.message(), e.pos);
      throw;
    } catch (const TemplateRuntimeError& err) {
      if (err.pos().line == 0) throw TemplateRuntimeError(err.message(), e.pos);
      throw;
    }
  }

  Value eval_node(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::Const: return static_cast<const ConstExpr&>(e).value;
      case Expr::Kind::Name: {
        const auto& n = static_cast<const NameExpr&>(e);
        if (const Value* v = scope->find(n.name)) return *v;
        return Value::undefined("'" + n.name + "' is undefined");
      }
      case Expr::Kind::Attr: {
        const auto& x = static_cast<const AttrExpr&>(e);
        return get_attr(eval(*x.obj, scope), x.attr, e.pos);
      }
      case Expr::Kind::Item: {
        const auto& x = static_cast<const ItemExpr&>(e);
        Value obj = eval(*x.obj, scope);
        return get_item(obj, eval(*x.key, scope), e.pos);
      }
      case Expr::Kind::Slice: {
        const auto& x = static_cast<const SliceExpr&>(e);
        Value obj = eval(*x.obj, scope);
        Value b, s, st;
        if (x.start) b = eval(*x.start, scope);
        if (x.stop) s = eval(*x.stop, scope);
        if (x.step) st = eval(*x.step, scope);
        return get_slice(obj, x.start ? &b : nullptr, x.stop ? &s : nullptr, x.step ? &st : nullptr, e.pos);
      }
      case Expr::Kind::Call: {
        const auto& c = static_cast<const CallExpr&>(e);
        Value callee = eval(*c.callee, scope);
        if (callee.is_undefined()) throw_undefined(callee, e.pos);
        if (!callee.is_callable()) throw TemplateRuntimeError("'" + type_name(callee) + "' object is not callable", e.pos);
        CallArgs a = eval_args(c.args, scope, e.pos);
        Value r = callee.fn().fn(a);
        check_size(r, e.pos);
        return r;
      }
      case Expr::Kind::Filter: {
        const auto& f = static_cast<const FilterExpr&>(e);
        return apply_filter_expr(f, eval(*f.arg, scope), scope);
      }
      case Expr::Kind::Test: {
        const auto& t = static_cast<const TestExpr&>(e);
        Value v = eval(*t.arg, scope);
        CallArgs a = eval_args(t.args, scope, e.pos);
        bool r = false;
        if (!apply_test(t.name, v, a, &r)) throw TemplateRuntimeError("No test named '" + t.name + "'.", e.pos);
        return Value::boolean(r != t.negated);
      }
      case Expr::Kind::Not: return Value::boolean(!truthy(eval(*static_cast<const UnaryExpr&>(e).arg, scope)));
      case Expr::Kind::Neg:
      case Expr::Kind::Pos: {
        Value v = eval(*static_cast<const UnaryExpr&>(e).arg, scope);
        if (v.is_undefined()) throw_undefined(v, e.pos);
        if (!v.is_number())
          throw TemplateRuntimeError("bad operand type for unary " + std::string(e.kind == Expr::Kind::Neg ? "-" : "+") +
                                         ": '" + type_name(v) + "'",
                                     e.pos);
        if (e.kind == Expr::Kind::Pos) return v.is_bool() ? Value::integer(v.as_int()) : v;
        return v.is_float() ? Value::number(-v.as_double()) : Value::integer(checked_sub(0, v.as_int(), e.pos));
      }
      case Expr::Kind::And:
      case Expr::Kind::Or: {
        const auto& b = static_cast<const BinaryExpr&>(e);
        Value l = eval(*b.left, scope);
        const bool t = truthy(l);
        if (e.kind == Expr::Kind::And ? !t : t) return l;
        return eval(*b.right, scope);
      }
      case Expr::Kind::Binary: {
        const auto& b = static_cast<const BinaryExpr&>(e);
        Value l = eval(*b.left, scope);
        Value r = eval(*b.right, scope);
        Value out = binary(b.op, l, r, e.pos);
        check_size(out, e.pos);
        return out;
      }
      case Expr::Kind::Compare: {
        const auto& c = static_cast<const CompareExpr&>(e);
        Value l = eval(*c.first, scope);
        for (const auto& [op, rhs] : c.rest) {
          Value r = eval(*rhs, scope);
          if (!compare(op, l, r, e.pos)) return Value::boolean(false);
          l = std::move(r);
        }
        return Value::boolean(true);
      }
      case Expr::Kind::Cond: {
        const auto& c = static_cast<const CondExpr&>(e);
        if (truthy(eval(*c.test, scope))) return eval(*c.yes, scope);
        if (c.no) return eval(*c.no, scope);
        return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
      }
      case Expr::Kind::List: {
        List l;
        const auto& le = static_cast<const ListExpr&>(e);
        for (const auto& x : le.items) l.push_back(eval(*x, scope));
        return le.tuple ? Value::tuple(std::move(l)) : Value::list(std::move(l));
      }
      case Expr::Kind::Dict: {
        Dict d;
        for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
          Value key = eval(*k, scope);
          if (!key.is_string()) throw TemplateRuntimeError("only string keys are supported in dict literals", k->pos);
          d.set(key.str(), eval(*v, scope));
        }
        return Value::dict(std::move(d));
      }
    }
    throw TemplateRuntimeError("internal error: unknown expression", e.pos);
  }

  static bool compare(const std::string& op, const Value& l, const Value& r, SourcePos pos) {
    if (op == "==") return py_equal(l, r);
    if (op == "!=") return !py_equal(l, r);
    if (op == "in") return contains(r, l, pos);
    if (op == "notin") return !contains(r, l, pos);
    if (l.is_undefined()) throw_undefined(l, pos);
    if (r.is_undefined()) throw_undefined(r, pos);
    if (op == "<") return py_less(l, r, pos);
    if (op == ">") return py_less(r, l, pos);
    if (op == "<=") return !py_less(r, l, pos);
    if (op == ">=") return !py_less(l, r, pos);
    throw TemplateRuntimeError("unknown comparison '" + op + "'", pos);
  }

  [[noreturn]] static void type_error(const std::string& op, const Value& l, const Value& r, SourcePos pos) {
    throw TemplateRuntimeError("unsupported operand type(s) for " + op + ": '" + type_name(l) + "' and '" +
                                   type_name(r) + "'",
                               pos);
  }

  static Value repeat(const Value& seq, std::int64_t n, std::size_t limit, SourcePos pos) {
    if (n <= 0) return seq.is_string() ? Value::string("") : Value::list();
    if (static_cast<std::uint64_t>(n) > limit && !(seq.is_string() ? seq.str().empty() : seq.items().empty()))
      throw TemplateLimitError("repetition exceeds " + std::to_string(limit) + " bytes", pos);
    if (seq.is_string()) {
      if (seq.str().size() * static_cast<std::size_t>(n) > limit)
        throw TemplateLimitError("string exceeds " + std::to_string(limit) + " bytes", pos);
      std::string out;
      for (std::int64_t i = 0; i < n; ++i) out += seq.str();
      return Value::string(std::move(out));
    }
    if (seq.items().size() * static_cast<std::size_t>(n) > limit)
      throw TemplateLimitError("list too large", pos);
    List out;
    for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
    return Value::list(std::move(out));
  }

  Value binary(const std::string& op, const Value& l, const Value& r, SourcePos pos) const {
    if (op == "~") return Value::string(py_str(l) + py_str(r));  // str_join: no escaping, undefined is ""
    if (l.is_undefined()) throw_undefined(l, pos);
    if (r.is_undefined()) throw_undefined(r, pos);
    const bool nums = l.is_number() && r.is_number();
    const bool any_float = l.is_float() || r.is_float();
    if (op == "+") {
      if (nums) return any_float ? Value::number(l.as_double() + r.as_double()) : Value::integer(checked_add(l.as_int(), r.as_int(), pos));
      if (l.is_string() && r.is_string()) {
        // markupsafe.Markup: adding a plain str to Markup (either side) escapes the plain one.
        if (l.is_safe() || r.is_safe())
          return Value::string((l.is_safe() ? l.str() : html_escape(l.str())) + (r.is_safe() ? r.str() : html_escape(r.str())), true);
        if (l.str().size() + r.str().size() > limits_.max_output_bytes)
          throw TemplateLimitError("string exceeds " + std::to_string(limits_.max_output_bytes) + " bytes", pos);
        return Value::string(l.str() + r.str());
      }
      if (l.is_list() && r.is_list()) {
        List out = l.items();
        out.insert(out.end(), r.items().begin(), r.items().end());
        return Value::list(std::move(out));
      }
      if (l.is_string()) throw TemplateRuntimeError("can only concatenate str (not \"" + type_name(r) + "\") to str", pos);
      type_error(op, l, r, pos);
    }
    if (op == "*") {
      if (nums) return any_float ? Value::number(l.as_double() * r.as_double()) : Value::integer(checked_mul(l.as_int(), r.as_int(), pos));
      if ((l.is_string() || l.is_list()) && (r.is_int() || r.is_bool())) return repeat(l, r.as_int(), limits_.max_output_bytes, pos);
      if ((r.is_string() || r.is_list()) && (l.is_int() || l.is_bool())) return repeat(r, l.as_int(), limits_.max_output_bytes, pos);
      type_error(op, l, r, pos);
    }
    if (!nums) type_error(op, l, r, pos);
    if (op == "-") return any_float ? Value::number(l.as_double() - r.as_double()) : Value::integer(checked_sub(l.as_int(), r.as_int(), pos));
    if (op == "/") {
      if (r.as_double() == 0) throw TemplateRuntimeError("division by zero", pos);
      return Value::number(l.as_double() / r.as_double());
    }
    if (op == "//" || op == "%") {
      if (r.as_double() == 0) throw TemplateRuntimeError("integer division or modulo by zero", pos);
      if (any_float) {
        // CPython float_divmod.
        const double a = l.as_double(), b = r.as_double();
        double mod = std::fmod(a, b);
        double div = (a - mod) / b;
        if (mod != 0) {
          if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0;
          }
        } else {
          mod = std::copysign(0.0, b);
        }
        double floordiv = std::copysign(0.0, a / b);
        if (div != 0) {
          floordiv = std::floor(div);
          if (div - floordiv > 0.5) floordiv += 1.0;
        }
        return op == "%" ? Value::number(mod) : Value::number(floordiv);
      }
      const std::int64_t a = l.as_int(), b = r.as_int();
      if (a == INT64_MIN && b == -1) checked_sub(0, a, pos);  // the one overflowing quotient
      std::int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {
        --q;
        m += b;
      }
      return op == "%" ? Value::integer(m) : Value::integer(q);
    }
    if (op == "**") {
      if (!any_float && r.as_int() >= 0) {
        std::int64_t result = 1, base = l.as_int(), e = r.as_int();
        while (e > 0) {  // square-and-multiply; any overflow means Python would need a big int
          if (e & 1) result = checked_mul(result, base, pos);
          e >>= 1;
          if (e) base = checked_mul(base, base, pos);
        }
        return Value::integer(result);
      }
      return Value::number(std::pow(l.as_double(), r.as_double()));
    }
    throw TemplateRuntimeError("unknown operator '" + op + "'", pos);
  }

  const TemplateLimits& limits_;
  std::size_t iterations_ = 0;
  int depth_ = 0;
  int eval_depth_ = 0;
};

}  // namespace

struct Template::Compiled {
  std::string source;
  Body body;
};

Template::Template(std::string source, TemplateLimits limits) : compiled_(std::make_unique<Compiled>()), limits_(limits) {
  compiled_->source = normalize_template_source(source);
  const SourceMap map(compiled_->source);
  compiled_->body = parse_template(tokenize_template(compiled_->source, map), map, limits_.max_nesting);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) throw TemplateRuntimeError("template context must be a JSON object", {});
  Dict vars;
  for (auto it = context.begin(); it != context.end(); ++it) vars.set(it.key(), Value::from_json(it.value()));
  return render(vars);
}

std::string Template::render(const Dict& variables) const {
  auto globals = std::make_shared<Scope>();
  Dict builtins;
  add_builtin_globals(builtins);
  for (auto& [k, v] : builtins.items) globals->vars[k] = v;
  for (const auto& [k, v] : variables.items) globals->vars[k] = v;
  auto top = std::make_shared<Scope>();
  top->parent = globals;
  Evaluator ev(limits_);
  std::string out;
  ev.exec(compiled_->body, top, out);
  return out;
}

}  // namespace fp4serve::jinja
