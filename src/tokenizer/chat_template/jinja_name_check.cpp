// Compile-time check of filter and test names, with jinja2's exemption for conditional code.
#include "tokenizer/chat_template/jinja_builtins.h"
#include "tokenizer/chat_template/jinja_parser.h"

namespace fp4serve::jinja {
namespace {

// jinja2 rejects unknown filters and tests when it compiles a template, except inside an `if`
// statement or a conditional expression (a "soft" frame), where the error waits until the filter
// is actually reached. Loops, macros and block sets open non-soft frames again.
class FilterTestChecker {
 public:
  void body(const Body& b, bool soft) {
    for (const auto& st : b) stmt(*st, soft);
  }

 private:
  void stmt(const Stmt& st, bool soft) {
    switch (st.kind) {
      case Stmt::Kind::Print: expr(static_cast<const PrintStmt&>(st).expr.get(), soft); break;
      case Stmt::Kind::If: {
        const auto& s = static_cast<const IfStmt&>(st);
        for (const auto& [test, b] : s.branches) {
          expr(test.get(), true);
          body(b, true);
        }
        body(s.else_body, true);
        break;
      }
      case Stmt::Kind::For: {
        const auto& s = static_cast<const ForStmt&>(st);
        expr(s.iter.get(), soft);
        expr(s.filter.get(), false);
        body(s.body, false);
        body(s.else_body, soft);
        break;
      }
      case Stmt::Kind::Set: expr(static_cast<const SetStmt&>(st).value.get(), soft); break;
      case Stmt::Kind::SetBlock: {
        const auto& s = static_cast<const SetBlockStmt&>(st);
        for (const auto& f : s.filters) expr(f.get(), false);
        body(s.body, false);
        break;
      }
      case Stmt::Kind::Macro: {
        const auto& s = static_cast<const MacroStmt&>(st);
        for (const auto& p : s.params) expr(p.second.get(), false);
        body(s.body, false);
        break;
      }
      case Stmt::Kind::Scope: body(static_cast<const ScopeStmt&>(st).body, false); break;
      default: break;
    }
  }

  void args(const ArgList& a, bool soft) {
    for (const auto& e : a.positional) expr(e.get(), soft);
    for (const auto& kv : a.keyword) expr(kv.second.get(), soft);
  }

  void expr(const Expr* e, bool soft) {
    if (!e) return;
    switch (e->kind) {
      case Expr::Kind::Filter: {
        const auto& f = static_cast<const FilterExpr&>(*e);
        if (!soft && !has_filter(f.name)) throw TemplateSyntaxError("No filter named '" + f.name + "'.", e->pos);
        expr(f.arg.get(), soft);
        args(f.args, soft);
        break;
      }
      case Expr::Kind::Test: {
        const auto& t = static_cast<const TestExpr&>(*e);
        if (!soft && !has_test(t.name)) throw TemplateSyntaxError("No test named '" + t.name + "'.", e->pos);
        expr(t.arg.get(), soft);
        args(t.args, soft);
        break;
      }
      case Expr::Kind::Cond: {
        const auto& c = static_cast<const CondExpr&>(*e);
        expr(c.test.get(), true);
        expr(c.yes.get(), true);
        expr(c.no.get(), true);
        break;
      }
      case Expr::Kind::Attr: expr(static_cast<const AttrExpr&>(*e).obj.get(), soft); break;
      case Expr::Kind::Item: {
        const auto& x = static_cast<const ItemExpr&>(*e);
        expr(x.obj.get(), soft);
        expr(x.key.get(), soft);
        break;
      }
      case Expr::Kind::Slice: {
        const auto& x = static_cast<const SliceExpr&>(*e);
        expr(x.obj.get(), soft);
        expr(x.start.get(), soft);
        expr(x.stop.get(), soft);
        expr(x.step.get(), soft);
        break;
      }
      case Expr::Kind::Call: {
        const auto& c = static_cast<const CallExpr&>(*e);
        expr(c.callee.get(), soft);
        args(c.args, soft);
        break;
      }
      case Expr::Kind::Neg:
      case Expr::Kind::Pos:
      case Expr::Kind::Not: expr(static_cast<const UnaryExpr&>(*e).arg.get(), soft); break;
      case Expr::Kind::Binary:
      case Expr::Kind::And:
      case Expr::Kind::Or: {
        const auto& b = static_cast<const BinaryExpr&>(*e);
        expr(b.left.get(), soft);
        expr(b.right.get(), soft);
        break;
      }
      case Expr::Kind::Compare: {
        const auto& c = static_cast<const CompareExpr&>(*e);
        expr(c.first.get(), soft);
        for (const auto& r : c.rest) expr(r.second.get(), soft);
        break;
      }
      case Expr::Kind::List:
        for (const auto& x : static_cast<const ListExpr&>(*e).items) expr(x.get(), soft);
        break;
      case Expr::Kind::Dict:
        for (const auto& kv : static_cast<const DictExpr&>(*e).items) {
          expr(kv.first.get(), soft);
          expr(kv.second.get(), soft);
        }
        break;
      default: break;
    }
  }
};

}  // namespace

void check_filter_and_test_names(const Body& body) { FilterTestChecker().body(body, false); }

}  // namespace fp4serve::jinja
