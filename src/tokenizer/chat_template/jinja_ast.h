// Syntax tree of a parsed template. Expressions and statements carry their source position so
// that runtime errors can name the line and column.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/chat_template/jinja_error.h"
#include "tokenizer/chat_template/jinja_value.h"

namespace fp4serve::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct ArgList {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Expr {
  enum class Kind { Const, Name, Attr, Item, Slice, Call, Filter, Test, Neg, Pos, Not, Binary, And, Or, Compare, Cond, List, Dict };
  explicit Expr(Kind k, SourcePos p) : kind(k), pos(p) {}
  virtual ~Expr() = default;
  Kind kind;
  SourcePos pos;
};

struct ConstExpr : Expr {
  ConstExpr(SourcePos p, Value v) : Expr(Kind::Const, p), value(std::move(v)) {}
  Value value;
};
struct NameExpr : Expr {
  NameExpr(SourcePos p, std::string n) : Expr(Kind::Name, p), name(std::move(n)) {}
  std::string name;
};
struct AttrExpr : Expr {  // obj.attr
  AttrExpr(SourcePos p, ExprPtr o, std::string a) : Expr(Kind::Attr, p), obj(std::move(o)), attr(std::move(a)) {}
  ExprPtr obj;
  std::string attr;
};
struct ItemExpr : Expr {  // obj[key]
  ItemExpr(SourcePos p, ExprPtr o, ExprPtr k) : Expr(Kind::Item, p), obj(std::move(o)), key(std::move(k)) {}
  ExprPtr obj, key;
};
struct SliceExpr : Expr {  // obj[start:stop:step]; absent parts are null
  SliceExpr(SourcePos p) : Expr(Kind::Slice, p) {}
  ExprPtr obj, start, stop, step;
};
struct CallExpr : Expr {
  CallExpr(SourcePos p) : Expr(Kind::Call, p) {}
  ExprPtr callee;
  ArgList args;
};
struct FilterExpr : Expr {  // arg | name(args)
  FilterExpr(SourcePos p) : Expr(Kind::Filter, p) {}
  ExprPtr arg;
  std::string name;
  ArgList args;
};
struct TestExpr : Expr {  // arg is [not] name(args)
  TestExpr(SourcePos p) : Expr(Kind::Test, p) {}
  ExprPtr arg;
  std::string name;
  ArgList args;
  bool negated = false;
};
struct UnaryExpr : Expr {  // -x, +x, not x
  UnaryExpr(Kind k, SourcePos p, ExprPtr a) : Expr(k, p), arg(std::move(a)) {}
  ExprPtr arg;
};
struct BinaryExpr : Expr {  // + - * / // % ** ~ ; And / Or use this too
  BinaryExpr(Kind k, SourcePos p, std::string o, ExprPtr l, ExprPtr r)
      : Expr(k, p), op(std::move(o)), left(std::move(l)), right(std::move(r)) {}
  std::string op;
  ExprPtr left, right;
};
struct CompareExpr : Expr {  // a == b < c in d ... (chained like Python)
  CompareExpr(SourcePos p) : Expr(Kind::Compare, p) {}
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;  // op in == != < <= > >= in notin
};
struct CondExpr : Expr {  // yes if test else no
  CondExpr(SourcePos p) : Expr(Kind::Cond, p) {}
  ExprPtr test, yes, no;  // no may be null (-> Undefined)
};
struct ListExpr : Expr {  // [a, b] or a tuple (a, b)
  ListExpr(SourcePos p, bool t = false) : Expr(Kind::List, p), tuple(t) {}
  std::vector<ExprPtr> items;
  bool tuple;
};
struct DictExpr : Expr {
  DictExpr(SourcePos p) : Expr(Kind::Dict, p) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

// An assignment target: `name`, `ns.attr`, or `a, b` (for loops and set).
struct Target {
  std::vector<std::string> names;  // >1 means tuple unpacking
  std::string attr;                // non-empty: names[0].attr (namespace assignment)
  SourcePos pos;
};

struct Stmt {
  enum class Kind { Output, Print, If, For, Set, SetBlock, Macro, Break, Continue, Scope };
  explicit Stmt(Kind k, SourcePos p) : kind(k), pos(p) {}
  virtual ~Stmt() = default;
  Kind kind;
  SourcePos pos;
};

struct OutputStmt : Stmt {
  OutputStmt(SourcePos p, std::string t) : Stmt(Kind::Output, p), text(std::move(t)) {}
  std::string text;
};
struct PrintStmt : Stmt {
  PrintStmt(SourcePos p, ExprPtr e) : Stmt(Kind::Print, p), expr(std::move(e)) {}
  ExprPtr expr;
};
struct IfStmt : Stmt {
  IfStmt(SourcePos p) : Stmt(Kind::If, p) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if / elif ...
  Body else_body;
};
struct ForStmt : Stmt {
  ForStmt(SourcePos p) : Stmt(Kind::For, p) {}
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in y if cond`; may be null
  Body body, else_body;
};
struct SetStmt : Stmt {
  SetStmt(SourcePos p) : Stmt(Kind::Set, p) {}
  Target target;
  ExprPtr value;
};
struct SetBlockStmt : Stmt {  // {% set x %}...{% endset %}
  SetBlockStmt(SourcePos p) : Stmt(Kind::SetBlock, p) {}
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;  // {% set x | f %}: arg is null, applied in order
  Body body;
};
struct MacroStmt : Stmt {
  MacroStmt(SourcePos p) : Stmt(Kind::Macro, p) {}
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
};
struct ScopeStmt : Stmt {  // a body rendered in place ({% generation %})
  ScopeStmt(SourcePos p) : Stmt(Kind::Scope, p) {}
  Body body;
};

}  // namespace fp4serve::jinja
