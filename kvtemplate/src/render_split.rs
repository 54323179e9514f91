//! Which templates can be rendered once per conversation, proven on the template's syntax
//! tree (issue #58; docs/architecture.md, "Render reuse").
//!
//! A chat template renders `header · body(m[0]) · … · body(m[n-1]) · footer` when its
//! messages are emitted by one top-level `{% for message in messages %}` loop. The body of
//! iteration `i` is a function of the loop's position and of what it reads. The template
//! qualifies — and [`split`] returns a [`LoopSplit`] — only when every read of the body is one
//! this module can bound:
//!
//! * the loop variable, and `messages[loop.index0 ± c]` for a constant `c` (a window of the
//!   messages around `i`: `lookahead` / `lookbehind` record the widest);
//! * `loop.index0`, `loop.index`, `loop.first`; `loop.last` (lookahead 1); nothing else of
//!   `loop` (`length`, `revindex`, `changed`, `cycle`, `previtem`, …);
//! * names nothing in the template assigns outside the loop: the render's context (every
//!   part but `messages` is compared whole before a reuse), kvexact's own functions, filters,
//!   tests and methods (pure) — never `strftime_now` (the clock);
//! * no statement that carries state from one iteration to the next: a name `set` at the
//!   loop's own level (minijinja keeps it in the loop's frame across iterations) is read only
//!   where this iteration has certainly set it already (on every path: both arms of an `if`);
//!   no `set x.attr` anywhere; no `break`, macro, call block, `do`, `with`, include or import.
//!
//! Everything outside the loop is rendered on every request (it may read anything). So for
//! two message lists equal on their first `p` messages (and an equal rest of the context),
//! the bodies of iterations `lookbehind ≤ i < p − lookahead` are equal: they read the same
//! values at the same positions, and no earlier iteration left state behind (the first
//! `lookbehind` iterations may index before the list's start, which Python wraps to its end:
//! they are rendered again). A template that breaks any rule has no split and is always
//! rendered whole.
//!
//! The split is the template's own (already rewritten) source with the message loop walking a
//! list of message indices instead (`{% for i in AT %}{% set message = messages[i] %}`), each
//! `loop.index0` / `index` / `first` / `last` of the loop written in terms of `i` and the
//! message count, a marker emitted at the start of every iteration and one after the loop;
//! the tags it writes carry the whitespace control of the tags they stand beside, so that
//! `-`, `+`, trim_blocks and lstrip_blocks act on the same text as before.

use crate::template_source::{tags, Tag};
use minijinja::machinery::ast::{BinOpKind, CallArg, Expr, Stmt};
use std::collections::HashSet;

/// Context variable: the message indices the split renders, in order.
pub(crate) const AT_VAR: &str = "__kvexact_render_at";
/// Context variable: the number of messages (`loop.last` is `i == n - 1`).
pub(crate) const N_VAR: &str = "__kvexact_render_n";
/// The split loop's variable: the message index.
const I_VAR: &str = "__kvexact_render_i";
/// The filter that emits [`MARK`].
pub(crate) const MARK_FILTER: &str = "__kvexact_render_mark";
/// Emitted at the start of every rendered iteration and after the loop. No proper prefix of
/// it is also a suffix (U+E000 occurs only at its start), so two occurrences never overlap:
/// an output holding exactly as many as were emitted holds none from the messages.
pub(crate) const MARK: &str = "\u{E000}kvexact-iteration\u{E001}";

/// A template proven to render its messages in one loop, and the split source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoopSplit {
    /// The (rewritten) template source with the loop's body wrapped and the markers added.
    pub source: String,
    /// How far past its own message an iteration may look (`loop.last` counts 1).
    pub lookahead: usize,
    /// How far before its own message an iteration may look.
    pub lookbehind: usize,
}

/// The split of `compiled` (the source as the environment compiles it, after kvexact's
/// rewrites), or why the template is rendered whole.
pub(crate) fn split(compiled: &str) -> Result<LoopSplit, String> {
    if compiled.contains("__kvexact_render") {
        return Err("the template names kvexact's render-reuse variables".into());
    }
    let ast =
        minijinja::machinery::parse(compiled, "chat_template", crate::template_source::syntax()?)
            .map_err(|e| e.to_string())?;
    let Stmt::Template(t) = &ast else {
        return Err("not a template".into());
    };
    let loops: Vec<usize> = (0..t.children.len())
        .filter(|&i| is_message_loop(&t.children[i]))
        .collect();
    let [at] = loops[..] else {
        return Err(format!(
            "{} top-level loops over `messages` (one is needed)",
            loops.len()
        ));
    };
    let Some(Stmt::ForLoop(f)) = t.children.get(at) else {
        return Err("not a loop".into());
    };
    let mut assigned = HashSet::new();
    for (i, s) in t.children.iter().enumerate() {
        if i != at {
            collect_assigned(s, &mut assigned)?;
        }
    }
    if assigned.contains("messages") || assigned.contains("loop") {
        return Err("the template assigns `messages` or `loop`".into());
    }
    let Expr::Var(target) = &f.target else {
        return Err("the message loop unpacks its item".into());
    };
    if assigned.contains(target.id) {
        return Err(format!("`{}` is also assigned outside the loop", target.id));
    }
    if f.filter_expr.is_some() || f.recursive || !f.else_body.is_empty() {
        return Err("the message loop has a filter, `recursive` or an `else`".into());
    }
    let mut outer_sets = HashSet::new();
    for s in &f.body {
        collect_outer_sets(s, &mut outer_sets);
    }
    if ["loop", "messages", target.id]
        .iter()
        .any(|n| outer_sets.contains(n))
    {
        return Err("the message loop assigns its own item, `loop` or `messages`".into());
    }
    let mut walk = BodyWalk {
        target: target.id,
        assigned: &assigned,
        outer_sets: &outer_sets,
        definite: HashSet::new(),
        loop_uses: Vec::new(),
        lookahead: 0,
        lookbehind: 0,
    };
    for s in &f.body {
        walk.stmt(s, Scope::Outer)?;
    }
    let span = f_span(&t.children[at]);
    let source = splice(compiled, span, target.id, &walk.loop_uses)?;
    Ok(LoopSplit {
        source,
        lookahead: walk.lookahead,
        lookbehind: walk.lookbehind,
    })
}

fn f_span(s: &Stmt<'_>) -> (usize, usize) {
    match s {
        Stmt::ForLoop(f) => {
            let sp = f.span();
            (sp.start_offset as usize, sp.end_offset as usize)
        }
        _ => (0, 0),
    }
}

/// `{% for X in __kvexact_loop_iterable((messages)) %}` (every loop is rewritten so).
fn is_message_loop(s: &Stmt<'_>) -> bool {
    let Stmt::ForLoop(f) = s else {
        return false;
    };
    let Expr::Call(c) = &f.iter else {
        return false;
    };
    matches!(&c.expr, Expr::Var(v) if v.id == crate::template_source::LOOP_ITERABLE)
        && matches!(&c.args[..], [CallArg::Pos(Expr::Var(v))] if v.id == "messages")
}

fn is_var(e: &Expr<'_>, name: &str) -> bool {
    matches!(e, Expr::Var(v) if v.id == name)
}

/// Every name a statement may bind (set targets and the object of `set x.attr`, loop
/// targets, macros, `with` names, imports); templates that mutate through `do` are refused.
fn collect_assigned<'a>(s: &Stmt<'a>, out: &mut HashSet<&'a str>) -> Result<(), String> {
    fn target<'a>(e: &Expr<'a>, out: &mut HashSet<&'a str>) {
        match e {
            Expr::Var(v) => {
                out.insert(v.id);
            }
            Expr::GetAttr(g) => target(&g.expr, out),
            Expr::GetItem(g) => target(&g.expr, out),
            Expr::Tuple(t) => t.items.iter().for_each(|i| target(i, out)),
            Expr::List(t) => t.items.iter().for_each(|i| target(i, out)),
            _ => {}
        }
    }
    let all = |body: &[Stmt<'a>], out: &mut HashSet<&'a str>| -> Result<(), String> {
        body.iter().try_for_each(|s| collect_assigned(s, out))
    };
    match s {
        Stmt::Template(t) => all(&t.children, out),
        Stmt::EmitExpr(_) | Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => Ok(()),
        Stmt::ForLoop(f) => {
            target(&f.target, out);
            all(&f.body, out)?;
            all(&f.else_body, out)
        }
        Stmt::IfCond(c) => {
            all(&c.true_body, out)?;
            all(&c.false_body, out)
        }
        Stmt::WithBlock(w) => {
            w.assignments.iter().for_each(|(t, _)| target(t, out));
            all(&w.body, out)
        }
        Stmt::Set(st) => {
            target(&st.target, out);
            Ok(())
        }
        Stmt::SetBlock(sb) => {
            target(&sb.target, out);
            all(&sb.body, out)
        }
        Stmt::AutoEscape(a) => all(&a.body, out),
        Stmt::FilterBlock(fb) => all(&fb.body, out),
        Stmt::Macro(m) => {
            out.insert(m.name);
            Ok(())
        }
        Stmt::CallBlock(_) => Ok(()),
        Stmt::Do(_) => Err("a `do` statement".into()),
        _ => Err("include, import, extends or block statements".into()),
    }
}

/// The names a `set` at the message loop's own level binds (those minijinja keeps in the
/// loop's frame from one iteration to the next).
fn collect_outer_sets<'a>(s: &Stmt<'a>, out: &mut HashSet<&'a str>) {
    let target = |e: &Expr<'a>, out: &mut HashSet<&'a str>| match e {
        Expr::Var(v) => {
            out.insert(v.id);
        }
        Expr::Tuple(t) => t.items.iter().for_each(|i| {
            if let Expr::Var(v) = i {
                out.insert(v.id);
            }
        }),
        _ => {}
    };
    match s {
        Stmt::Set(st) => target(&st.target, out),
        Stmt::SetBlock(sb) => target(&sb.target, out),
        Stmt::IfCond(c) => {
            c.true_body.iter().for_each(|s| collect_outer_sets(s, out));
            c.false_body.iter().for_each(|s| collect_outer_sets(s, out));
        }
        Stmt::FilterBlock(fb) => fb.body.iter().for_each(|s| collect_outer_sets(s, out)),
        _ => {}
    }
}

/// Where a statement of the message loop's body sits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Directly in the message loop (`loop` is the message loop; `set` persists across its
    /// iterations).
    Outer,
    /// Inside a loop nested in it (`loop` is that loop; its frame ends with it).
    Inner,
    /// A nested loop's `if` filter (which loop `loop` names there is not relied on: refused).
    Filter,
}

struct BodyWalk<'s, 'a> {
    target: &'a str,
    assigned: &'s HashSet<&'a str>,
    /// Names set at the loop's own level ([`collect_outer_sets`]).
    outer_sets: &'s HashSet<&'a str>,
    /// Of those, the ones this iteration has certainly set at the point of the walk (on
    /// every path to it): a read of any other would see the previous iteration's value.
    definite: HashSet<&'a str>,
    /// Each `loop.<attr>` of the message loop: its byte range, its text (white space aside)
    /// and what the split writes there.
    loop_uses: Vec<(usize, usize, String, String)>,
    lookahead: usize,
    lookbehind: usize,
}

impl<'a> BodyWalk<'_, 'a> {
    fn stmts(&mut self, body: &[Stmt<'a>], scope: Scope) -> Result<(), String> {
        body.iter().try_for_each(|s| self.stmt(s, scope))
    }

    fn stmt(&mut self, s: &Stmt<'a>, scope: Scope) -> Result<(), String> {
        match s {
            Stmt::EmitExpr(e) => self.expr(&e.expr, scope),
            Stmt::EmitRaw(_) | Stmt::Continue(_) => Ok(()),
            Stmt::IfCond(c) => {
                self.expr(&c.expr, scope)?;
                let before = self.definite.clone();
                self.stmts(&c.true_body, scope)?;
                let after_true = std::mem::replace(&mut self.definite, before);
                self.stmts(&c.false_body, scope)?;
                self.definite.retain(|n| after_true.contains(n));
                Ok(())
            }
            Stmt::ForLoop(f) => {
                if f.recursive {
                    return Err("a recursive loop in the message loop".into());
                }
                self.expr(&f.iter, scope)?;
                if let Some(e) = &f.filter_expr {
                    self.expr(e, Scope::Filter)?;
                }
                self.stmts(&f.body, Scope::Inner)?;
                self.stmts(&f.else_body, Scope::Inner)
            }
            Stmt::Set(st) => {
                self.expr(&st.expr, scope)?;
                self.set_target(&st.target, scope)
            }
            Stmt::SetBlock(sb) => {
                if let Some(f) = &sb.filter {
                    self.expr(f, scope)?;
                }
                self.stmts(&sb.body, scope)?;
                self.set_target(&sb.target, scope)
            }
            Stmt::FilterBlock(fb) => {
                self.expr(&fb.filter, scope)?;
                self.stmts(&fb.body, scope)
            }
            Stmt::Break(_) if scope == Scope::Inner => Ok(()),
            Stmt::Break(_) => Err("`break` in the message loop".into()),
            _ => Err("a macro, call block, `do`, `with`, autoescape or include statement in the message loop".into()),
        }
    }

    /// A `set` target: plain names only; at the loop's own level they become certainly set
    /// from here on in this iteration; inside a nested loop they live in that loop's frame,
    /// and must not be names the loop's own level sets.
    fn set_target(&mut self, t: &Expr<'a>, scope: Scope) -> Result<(), String> {
        let names: Vec<&'a str> = match t {
            Expr::Var(v) => vec![v.id],
            Expr::Tuple(t) => t
                .items
                .iter()
                .map(|i| match i {
                    Expr::Var(v) => Ok(v.id),
                    _ => Err("`set` of an attribute or item in the message loop".to_string()),
                })
                .collect::<Result<_, _>>()?,
            _ => return Err("`set` of an attribute or item in the message loop".into()),
        };
        for n in names {
            if n == "messages" || n == "loop" {
                return Err(format!("the message loop assigns `{n}`"));
            }
            match scope {
                Scope::Outer => {
                    self.definite.insert(n);
                }
                Scope::Inner if self.outer_sets.contains(n) => {
                    return Err(format!(
                        "`{n}` is set both in the message loop and in a loop nested in it"
                    ))
                }
                Scope::Inner | Scope::Filter => {}
            }
        }
        Ok(())
    }

    fn name(&mut self, id: &str, scope: Scope) -> Result<(), String> {
        match id {
            "loop" if scope == Scope::Outer => Err("reads the message loop's `loop` whole".into()),
            "loop" if scope == Scope::Filter => {
                Err("reads `loop` in a nested loop's filter".into())
            }
            "messages" => Err("reads `messages` other than at the loop's index".into()),
            "strftime_now" => Err("reads the clock in the message loop".into()),
            _ if id == self.target => Ok(()),
            _ if self.outer_sets.contains(id) && !self.definite.contains(id) => Err(format!(
                "reads `{id}` where this iteration may not have set it (minijinja keeps the \
                 previous iteration's)"
            )),
            _ if self.assigned.contains(id) => Err(format!(
                "reads `{id}`, which the template assigns outside the message loop"
            )),
            _ => Ok(()),
        }
    }

    /// `loop.<attr>` of the message loop at `span`: recorded with the expression of the
    /// message index the split writes in its place.
    fn loop_attr(&mut self, attr: &str, span: minijinja::machinery::Span) -> Result<(), String> {
        let with = match attr {
            "index0" => I_VAR.to_string(),
            "index" => format!("({I_VAR} + 1)"),
            "first" => format!("({I_VAR} == 0)"),
            "last" => {
                self.lookahead = self.lookahead.max(1);
                format!("({I_VAR} == {N_VAR} - 1)")
            }
            other => return Err(format!("reads `loop.{other}`")),
        };
        self.loop_uses.push((
            span.start_offset as usize,
            span.end_offset as usize,
            format!("loop.{attr}"),
            with,
        ));
        Ok(())
    }

    /// The offset from `loop.index0` of `loop.index0`, `loop.index` and either plus or minus
    /// an integer constant.
    fn index_offset(e: &Expr<'_>) -> Option<i64> {
        match e {
            Expr::GetAttr(g) if is_var(&g.expr, "loop") => match g.name {
                "index0" => Some(0),
                "index" => Some(1),
                _ => None,
            },
            Expr::BinOp(b) if matches!(b.op, BinOpKind::Add | BinOpKind::Sub) => {
                let konst = |e: &Expr<'_>| match e {
                    Expr::Const(c) if c.value.is_integer() => i64::try_from(c.value.clone()).ok(),
                    _ => None,
                };
                match b.op {
                    BinOpKind::Add => match (Self::index_offset(&b.left), konst(&b.right)) {
                        (Some(o), Some(c)) => o.checked_add(c),
                        _ => match (konst(&b.left), Self::index_offset(&b.right)) {
                            (Some(c), Some(o)) => o.checked_add(c),
                            _ => None,
                        },
                    },
                    _ => match (Self::index_offset(&b.left), konst(&b.right)) {
                        (Some(o), Some(c)) => o.checked_sub(c),
                        _ => None,
                    },
                }
            }
            _ => None,
        }
    }

    fn args(&mut self, args: &[CallArg<'a>], scope: Scope) -> Result<(), String> {
        args.iter().try_for_each(|a| match a {
            CallArg::Pos(e)
            | CallArg::Kwarg(_, e)
            | CallArg::PosSplat(e)
            | CallArg::KwargSplat(e) => self.expr(e, scope),
        })
    }

    fn expr(&mut self, e: &Expr<'a>, scope: Scope) -> Result<(), String> {
        match e {
            Expr::Var(v) => self.name(v.id, scope),
            Expr::Const(_) => Ok(()),
            Expr::GetAttr(g) if scope == Scope::Outer && is_var(&g.expr, "loop") => {
                self.loop_attr(g.name, g.span())
            }
            Expr::GetAttr(g) => self.expr(&g.expr, scope),
            Expr::GetItem(g) if is_var(&g.expr, "messages") => {
                if scope != Scope::Outer {
                    return Err("indexes `messages` inside a nested loop".into());
                }
                let d = Self::index_offset(&g.subscript_expr)
                    .ok_or("indexes `messages` other than at the loop's index ± a constant")?;
                let far = usize::try_from(d.unsigned_abs()).map_err(|e| e.to_string())?;
                if d > 0 {
                    self.lookahead = self.lookahead.max(far);
                } else {
                    self.lookbehind = self.lookbehind.max(far);
                }
                self.expr(&g.subscript_expr, scope)
            }
            Expr::GetItem(g) => {
                self.expr(&g.expr, scope)?;
                self.expr(&g.subscript_expr, scope)
            }
            Expr::Call(c) => {
                match &c.expr {
                    Expr::GetAttr(g) if scope == Scope::Outer && is_var(&g.expr, "loop") => {
                        return Err(format!("calls `loop.{}`", g.name));
                    }
                    other => self.expr(other, scope)?,
                }
                self.args(&c.args, scope)
            }
            Expr::Slice(s) => {
                self.expr(&s.expr, scope)?;
                for e in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(e, scope)?;
                }
                Ok(())
            }
            Expr::UnaryOp(u) => self.expr(&u.expr, scope),
            Expr::BinOp(b) => {
                self.expr(&b.left, scope)?;
                self.expr(&b.right, scope)
            }
            Expr::Compare(c) => {
                self.expr(&c.expr, scope)?;
                c.ops.iter().try_for_each(|o| self.expr(&o.expr, scope))
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr, scope)?;
                self.expr(&i.true_expr, scope)?;
                match &i.false_expr {
                    Some(f) => self.expr(f, scope),
                    None => Ok(()),
                }
            }
            Expr::Filter(f) => {
                if let Some(e) = &f.expr {
                    self.expr(e, scope)?;
                }
                self.args(&f.args, scope)
            }
            Expr::Test(t) => {
                self.expr(&t.expr, scope)?;
                self.args(&t.args, scope)
            }
            Expr::List(l) => l.items.iter().try_for_each(|i| self.expr(i, scope)),
            Expr::Tuple(l) => l.items.iter().try_for_each(|i| self.expr(i, scope)),
            Expr::Map(m) => {
                m.keys.iter().try_for_each(|i| self.expr(i, scope))?;
                m.values.iter().try_for_each(|i| self.expr(i, scope))
            }
        }
    }
}

/// The first word of a block tag (after its whitespace control).
fn keyword<'s>(source: &'s str, t: &Tag) -> &'s str {
    let inner = source.get(t.inner.clone()).unwrap_or("");
    let inner = inner.strip_prefix(['-', '+']).unwrap_or(inner).trim_start();
    let end = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(inner.len());
    &inner[..end]
}

/// The whitespace control a tag carries at its start (`{%-`) or end (`-%}`).
fn control(source: &str, at: usize) -> &str {
    match source.as_bytes().get(at) {
        Some(b'-') => "-",
        Some(b'+') => "+",
        _ => "",
    }
}

/// The split source: the loop whose `for` tag holds `span.0` made to walk the indices
/// [`AT_VAR`] lists, each `loop.<attr>` of `uses` written in terms of the index, and marked.
fn splice(
    source: &str,
    span: (usize, usize),
    target: &str,
    uses: &[(usize, usize, String, String)],
) -> Result<String, String> {
    let blocks: Vec<Tag> = tags(source).filter(|t| t.block).collect();
    let open = blocks
        .iter()
        .position(|t| t.inner.start.saturating_sub(2) <= span.0 && span.0 < t.inner.end)
        .filter(|&i| keyword(source, &blocks[i]) == "for")
        .ok_or("the message loop's tag was not found")?;
    let mut depth = 0usize;
    let mut close = None;
    for (i, t) in blocks.iter().enumerate().skip(open) {
        match keyword(source, t) {
            "for" => depth += 1,
            "endfor" => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close.ok_or("the message loop's `endfor` was not found")?;
    let (o, c) = (&blocks[open], &blocks[close]);
    if !(c.inner.start <= span.1 && span.1 <= c.inner.end + 2) {
        return Err("the message loop's `endfor` is not where the parser ends the loop".into());
    }
    // Tag extents: `{%` two bytes before `inner`, `%}` right after it.
    let (o_start, o_end) = (o.inner.start - 2, o.inner.end + 2);
    let (c_start, c_end) = (c.inner.start - 2, c.inner.end + 2);
    let o_lead = control(source, o.inner.start);
    let o_trail = control(source, o.inner.end.saturating_sub(1));
    let c_trail = control(source, c.inner.end.saturating_sub(1));
    let mut out = String::with_capacity(source.len() + 256);
    out.push_str(&source[..o_start]);
    out.push_str(&format!(
        "{{%{o_lead} for {I_VAR} in {AT_VAR} %}}{{% set {target} = messages[{I_VAR}] %}}\
         {{% filter {MARK_FILTER} %}}{{% endfilter {o_trail}%}}"
    ));
    let mut at = o_end;
    let mut uses: Vec<&(usize, usize, String, String)> = uses.iter().collect();
    uses.sort_by_key(|u| u.0);
    for (from, to, expect, with) in uses {
        let text = source.get(*from..*to).unwrap_or("");
        let plain: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if *from < at || *to > c_start || plain != *expect {
            return Err(format!("`loop` read at an unexpected place ({text:?})"));
        }
        out.push_str(&source[at..*from]);
        out.push_str(with);
        at = *to;
    }
    out.push_str(&source[at..c_end]);
    out.push_str(&format!(
        "{{% filter {MARK_FILTER} %}}{{% endfilter {c_trail}%}}"
    ));
    out.push_str(&source[c_end..]);
    Ok(out)
}
