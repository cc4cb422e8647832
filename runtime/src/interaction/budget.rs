//! Budgets: limits on tokens, cost and tool calls, per run and shared down its delegate tree.
//!
//! A [`Budget`] is configuration (part of the agent's configuration digest); what a run has
//! spent is durable state ([`Spending`] beside the summed [`Usage`]), so a restored run goes on
//! from the same figures and nothing settled is counted twice: a settlement is added once, when
//! the Step that consumes it is adopted, and a model call re-issued after an Unknown settles
//! the same Effect once.
//!
//! * **Reserved before each model call.** The next call may start only if what was spent plus
//!   the call's reservation fits every limit: input ≈ the working context's canonical bytes / 4
//!   (rounded up), output = the request's `max_output_tokens`, else
//!   [`Budget::reserve_output_tokens`] (default [`DEFAULT_RESERVE_OUTPUT_TOKENS`]), cost = that
//!   usage at the model's [`Price`].
//! * **Settled from the reported usage.** A response's reported tokens replace the
//!   reservation. A provider may report more than was reserved (an output without a
//!   `max_output_tokens` cap, an input longer than the estimate); that call is counted in full
//!   and no further call starts.
//! * **Tool calls** are counted when the tool call is started, once per call.
//! * **Delegates** share the tree's budget: when a parent starts delegates it grants each an
//!   equal share of what remains of every limit (the child's limits are the smaller of its own
//!   and the grant); a finished delegate's own spending is added to the parent's; a delegate
//!   that ended without an output (failed, canceled) reports none, so the parent counts the
//!   whole grant it gave it.
//!
//! Amounts are integers: tokens, tool calls and micro-dollars (a price is micro-dollars per
//! million tokens, a call's cost is rounded up to the next micro-dollar), never floats.

use super::codes;
use crate::chat::{Options, Usage};
use crate::json::{DecodeError, FromJson, Json, ObjectBuilder, ObjectReader, ToJson};
use crate::kernel::failure::{Failure, FailureCode};
use std::collections::BTreeMap;

/// The output tokens a model call reserves when its request sets no `max_output_tokens`.
pub const DEFAULT_RESERVE_OUTPUT_TOKENS: u32 = 4096;

/// Bytes of canonical context per reserved input token (a common rule of thumb for English
/// text and JSON; the reported usage settles the real figure).
pub const BYTES_PER_INPUT_TOKEN: u64 = 4;

/// A model's prices in micro-dollars (10⁻⁶ USD) per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Price {
    /// Per million input tokens not read from the prompt cache.
    pub input: u64,
    /// Per million input tokens read from the prompt cache.
    pub cached_input: u64,
    /// Per million output tokens (reasoning included).
    pub output: u64,
}

impl Price {
    /// Input and output prices in micro-dollars per million tokens (cached input at the input
    /// price until [`Price::cached_input`] says otherwise). `$2.50 / 1M` is `2_500_000`.
    pub fn per_million_usd_micros(input: u64, output: u64) -> Price {
        Price { input, cached_input: input, output }
    }

    /// The price of cached input tokens, per million.
    pub fn cached_input(mut self, per_million: u64) -> Price {
        self.cached_input = per_million;
        self
    }

    /// What `usage` costs, in micro-dollars, rounded up.
    pub fn cost_micros(&self, usage: Usage) -> u64 {
        let cached = u128::from(usage.cache_read_tokens.min(usage.input_tokens));
        let fresh = u128::from(usage.input_tokens) - cached;
        let nano = (fresh * u128::from(self.input))
            .saturating_add(cached * u128::from(self.cached_input))
            .saturating_add(u128::from(usage.output_tokens) * u128::from(self.output));
        u64::try_from(nano.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }

    fn to_json(self) -> Json {
        ObjectBuilder::new()
            .field("cached_input", &self.cached_input)
            .field("input", &self.input)
            .field("output", &self.output)
            .build()
    }
}

/// Prices per model name (the names the agent's requests carry: the configured model, or a
/// request's `options.model`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prices {
    models: BTreeMap<String, Price>,
}

impl Prices {
    pub fn new() -> Prices {
        Prices::default()
    }

    /// Sets `model`'s price.
    pub fn model(mut self, model: impl Into<String>, price: Price) -> Prices {
        self.models.insert(model.into(), price);
        self
    }

    pub fn get(&self, model: &str) -> Option<Price> {
        self.models.get(model).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// The canonical JSON of the table (for configuration digests).
    pub fn to_json(&self) -> Json {
        let mut b = ObjectBuilder::new();
        for (name, price) in &self.models {
            b = b.value(name, price.to_json());
        }
        b.build()
    }
}

/// Which limit a budget failure names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BudgetKind {
    InputTokens,
    OutputTokens,
    TotalTokens,
    Cost,
    ToolCalls,
    /// Elapsed time in milliseconds ([`crate::interaction::run_clock`]): not an amount, so
    /// [`Amounts`] and [`Limits`] never hold it.
    Time,
}

impl BudgetKind {
    /// The limit's name, as in [`Limits`]' wire form (`time_ms` for time).
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::InputTokens => "input_tokens",
            BudgetKind::OutputTokens => "output_tokens",
            BudgetKind::TotalTokens => "total_tokens",
            BudgetKind::Cost => "cost_micros",
            BudgetKind::ToolCalls => "tool_calls",
            BudgetKind::Time => "time_ms",
        }
    }

    /// The kind named `name` ([`BudgetKind::as_str`]).
    pub fn from_name(name: &str) -> Option<BudgetKind> {
        BudgetKind::EVERY.into_iter().find(|k| k.as_str() == name)
    }

    /// The failure code of a run stopped by this limit.
    pub fn code(self) -> FailureCode {
        match self {
            BudgetKind::InputTokens => codes::BUDGET_INPUT_TOKENS,
            BudgetKind::OutputTokens => codes::BUDGET_OUTPUT_TOKENS,
            BudgetKind::TotalTokens => codes::BUDGET_TOTAL_TOKENS,
            BudgetKind::Cost => codes::BUDGET_COST,
            BudgetKind::ToolCalls => codes::BUDGET_TOOL_CALLS,
            BudgetKind::Time => codes::BUDGET_TIME,
        }
    }

    /// Every amount kind (time excluded).
    pub(crate) const ALL: [BudgetKind; 5] = [
        BudgetKind::InputTokens,
        BudgetKind::OutputTokens,
        BudgetKind::TotalTokens,
        BudgetKind::Cost,
        BudgetKind::ToolCalls,
    ];

    /// Every limit kind, time included.
    pub const EVERY: [BudgetKind; 6] = [
        BudgetKind::InputTokens,
        BudgetKind::OutputTokens,
        BudgetKind::TotalTokens,
        BudgetKind::Cost,
        BudgetKind::ToolCalls,
        BudgetKind::Time,
    ];
}

/// An amount per limit kind: what was spent, reserved or charged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Amounts {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub cost_micros: u64,
    pub tool_calls: u64,
}

impl Amounts {
    pub fn get(&self, kind: BudgetKind) -> u64 {
        match kind {
            BudgetKind::InputTokens => self.input_tokens,
            BudgetKind::OutputTokens => self.output_tokens,
            BudgetKind::TotalTokens => self.total_tokens,
            BudgetKind::Cost => self.cost_micros,
            BudgetKind::ToolCalls => self.tool_calls,
            BudgetKind::Time => 0,
        }
    }

    pub(crate) fn set(&mut self, kind: BudgetKind, value: u64) {
        match kind {
            BudgetKind::InputTokens => self.input_tokens = value,
            BudgetKind::OutputTokens => self.output_tokens = value,
            BudgetKind::TotalTokens => self.total_tokens = value,
            BudgetKind::Cost => self.cost_micros = value,
            BudgetKind::ToolCalls => self.tool_calls = value,
            BudgetKind::Time => {}
        }
    }

    pub fn saturating_add(mut self, other: Amounts) -> Amounts {
        for k in BudgetKind::ALL {
            self.set(k, self.get(k).saturating_add(other.get(k)));
        }
        self
    }

    pub fn is_zero(&self) -> bool {
        *self == Amounts::default()
    }
}

impl ToJson for Amounts {
    fn to_json(&self) -> Json {
        let mut b = ObjectBuilder::new();
        for k in BudgetKind::ALL {
            let v = self.get(k);
            b = b.opt_field(k.as_str(), (v != 0).then_some(&v));
        }
        b.build()
    }
}

impl FromJson for Amounts {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let mut a = Amounts::default();
        for k in BudgetKind::ALL {
            a.set(k, nonzero(&mut r, k.as_str())?);
        }
        r.finish()?;
        Ok(a)
    }
}

/// Upper limits per kind; `None` is unlimited.
///
/// Wire form (a delegate's grant in its input): `{"input_tokens"?:u64,"output_tokens"?:u64,
/// "total_tokens"?:u64,"cost_micros"?:u64,"tool_calls"?:u64}`, only the set limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
    pub cost_micros: Option<u64>,
    pub tool_calls: Option<u64>,
}

impl Limits {
    pub fn get(&self, kind: BudgetKind) -> Option<u64> {
        match kind {
            BudgetKind::InputTokens => self.input_tokens,
            BudgetKind::OutputTokens => self.output_tokens,
            BudgetKind::TotalTokens => self.total_tokens,
            BudgetKind::Cost => self.cost_micros,
            BudgetKind::ToolCalls => self.tool_calls,
            BudgetKind::Time => None,
        }
    }

    fn set(&mut self, kind: BudgetKind, value: Option<u64>) {
        match kind {
            BudgetKind::InputTokens => self.input_tokens = value,
            BudgetKind::OutputTokens => self.output_tokens = value,
            BudgetKind::TotalTokens => self.total_tokens = value,
            BudgetKind::Cost => self.cost_micros = value,
            BudgetKind::ToolCalls => self.tool_calls = value,
            BudgetKind::Time => {}
        }
    }

    /// Each set limit raised by what `extension` grants of its kind (an unset limit stays
    /// unlimited).
    pub fn extended_by(mut self, extension: Amounts) -> Limits {
        for k in BudgetKind::ALL {
            let v = self.get(k).map(|l| l.saturating_add(extension.get(k)));
            self.set(k, v);
        }
        self
    }

    /// Whether no limit is set.
    pub fn is_unlimited(&self) -> bool {
        BudgetKind::ALL.iter().all(|k| self.get(*k).is_none())
    }

    /// The tighter of both, per kind.
    pub fn min(mut self, other: Limits) -> Limits {
        for k in BudgetKind::ALL {
            let v = match (self.get(k), other.get(k)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.set(k, v);
        }
        self
    }

    /// What remains after `spent`, split in `shares` equal parts (rounded down): a grant to
    /// each of `shares` delegates started together.
    pub fn share_of_remaining(&self, spent: Amounts, shares: u64) -> Limits {
        let mut grant = Limits::default();
        for k in BudgetKind::ALL {
            grant.set(k, self.get(k).map(|l| l.saturating_sub(spent.get(k)) / shares.max(1)));
        }
        grant
    }

    /// A grant charged in full (a delegate that reported no spending): every granted limit.
    pub fn as_charge(&self) -> Amounts {
        let mut a = Amounts::default();
        for k in BudgetKind::ALL {
            a.set(k, self.get(k).unwrap_or(0));
        }
        a
    }

    /// The first limit that `spent + reserved` would pass.
    pub fn first_exceeded(&self, spent: Amounts, reserved: Amounts) -> Option<Exhausted> {
        BudgetKind::ALL.into_iter().find_map(|kind| {
            let limit = self.get(kind)?;
            let (s, r) = (spent.get(kind), reserved.get(kind));
            (s.saturating_add(r) > limit).then_some(Exhausted { kind, limit, spent: s, reserved: r })
        })
    }
}

impl ToJson for Limits {
    fn to_json(&self) -> Json {
        let mut b = ObjectBuilder::new();
        for k in BudgetKind::ALL {
            b = b.opt_field(k.as_str(), self.get(k).as_ref());
        }
        b.build()
    }
}

impl FromJson for Limits {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let mut l = Limits::default();
        for k in BudgetKind::ALL {
            l.set(k, r.optional::<u64>(k.as_str())?);
        }
        r.finish()?;
        if l.is_unlimited() {
            return Err(DecodeError::invalid("an empty grant is omitted, not written".to_owned()));
        }
        Ok(l)
    }
}

/// A limit the next call would pass: which, its figures, and the failure that ends the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exhausted {
    pub kind: BudgetKind,
    pub limit: u64,
    pub spent: u64,
    pub reserved: u64,
}

impl Exhausted {
    pub fn failure(&self, what: &str) -> Failure {
        codes::failure(
            self.kind.code(),
            &format!(
                "budget exhausted: {} limit {}, spent {}, {what} needs {}; raise the agent's Budget or give the run less to do",
                self.kind.as_str(),
                self.limit,
                self.spent,
                self.reserved
            ),
        )
    }
}

/// Durable spending beside the summed [`Usage`]: the cost of the settled calls, the tool calls
/// started, and grants charged in full for delegates that reported no spending (all summed
/// over this run and the delegates it folded).
///
/// Wire form: `{"cost_micros"?:u64,"tool_calls"?:u64,"charged"?:Amounts}`, members written
/// only when not zero; the whole member is omitted when zero (an explicit zero is refused, so
/// bytes stay canonical).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spending {
    pub cost_micros: u64,
    pub tool_calls: u64,
    pub charged: Amounts,
}

impl Spending {
    pub fn is_zero(&self) -> bool {
        *self == Spending::default()
    }

    pub fn saturating_add(self, other: Spending) -> Spending {
        Spending {
            cost_micros: self.cost_micros.saturating_add(other.cost_micros),
            tool_calls: self.tool_calls.saturating_add(other.tool_calls),
            charged: self.charged.saturating_add(other.charged),
        }
    }

    /// What counts against the limits: `usage`, this spending and the charges.
    pub fn amounts(&self, usage: Usage) -> Amounts {
        Amounts {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.total(),
            cost_micros: self.cost_micros,
            tool_calls: self.tool_calls,
        }
        .saturating_add(self.charged)
    }
}

impl ToJson for Spending {
    fn to_json(&self) -> Json {
        let nonzero = |n: &u64| (*n != 0).then_some(*n);
        ObjectBuilder::new()
            .opt_field("cost_micros", nonzero(&self.cost_micros).as_ref())
            .opt_field("tool_calls", nonzero(&self.tool_calls).as_ref())
            .opt_field("charged", (!self.charged.is_zero()).then_some(&self.charged))
            .build()
    }
}

impl FromJson for Spending {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let mut r = ObjectReader::new(value)?;
        let s = Spending {
            cost_micros: nonzero(&mut r, "cost_micros")?,
            tool_calls: nonzero(&mut r, "tool_calls")?,
            charged: r.optional("charged")?.unwrap_or_default(),
        };
        r.finish()?;
        Ok(s)
    }
}

/// An optional count that is written only when not zero: absent reads as zero, `0` is refused.
fn nonzero(r: &mut ObjectReader<'_>, key: &'static str) -> Result<u64, DecodeError> {
    match r.optional::<u64>(key)? {
        Some(0) => Err(DecodeError::invalid("a zero amount is omitted, not written".to_owned()).in_member(key)),
        other => Ok(other.unwrap_or(0)),
    }
}

/// An optional `spending` member: absent is zero, an explicit zero is refused.
pub(crate) fn read_spending(r: &mut ObjectReader<'_>) -> Result<Spending, DecodeError> {
    match r.optional::<Spending>("spending")? {
        Some(s) if s.is_zero() => {
            Err(DecodeError::invalid("a zero spending is omitted, not written".to_owned()).in_member("spending"))
        }
        other => Ok(other.unwrap_or_default()),
    }
}

/// An agent's budget: limits on tokens, cost, tool calls and time for one run and every delegate run
/// it starts (see the module docs for how it is reserved, settled and shared).
///
/// ```
/// use keel::interaction::budget::Budget;
/// let budget = Budget::new().total_tokens(100_000).cost_usd_micros(2_000_000).tool_calls(50);
/// assert_eq!(budget.limits().tool_calls, Some(50));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    limits: Limits,
    reserve_output_tokens: Option<u32>,
    time_ms: Option<u64>,
    on_exhausted: OnExhausted,
}

/// What a run does when the next model call or tool call would pass one of its own limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnExhausted {
    /// The run fails with `interaction.budget.<limit>` (the default).
    #[default]
    Fail,
    /// The run parks on a durable question to the host (an input request whose prompt is a
    /// [`BudgetQuestion`](crate::interaction::budget_question::BudgetQuestion)): an answered
    /// [`BudgetExtension`](crate::interaction::budget_question::BudgetExtension) raises the
    /// limits and the run goes on where it stopped; a decline fails it as [`OnExhausted::Fail`]
    /// would have. Only the run's own limits ask: a delegate that passes the share its parent
    /// granted fails, and its parent asks when its own next call does not fit.
    AskHuman,
}

impl Budget {
    /// No limit yet.
    pub fn new() -> Budget {
        Budget::default()
    }

    /// At most `n` input tokens (prompt, cache reads and writes included).
    pub fn input_tokens(mut self, n: u64) -> Budget {
        self.limits.input_tokens = Some(n);
        self
    }

    /// At most `n` output tokens (reasoning included).
    pub fn output_tokens(mut self, n: u64) -> Budget {
        self.limits.output_tokens = Some(n);
        self
    }

    /// At most `n` input plus output tokens.
    pub fn total_tokens(mut self, n: u64) -> Budget {
        self.limits.total_tokens = Some(n);
        self
    }

    /// At most `micros` micro-dollars (`1_000_000` is one US dollar), at the prices given
    /// with the agent's `Prices`.
    pub fn cost_usd_micros(mut self, micros: u64) -> Budget {
        self.limits.cost_micros = Some(micros);
        self
    }

    /// At most `n` tool calls started (delegate runs are not tool calls; their own tool calls
    /// count).
    pub fn tool_calls(mut self, n: u64) -> Budget {
        self.limits.tool_calls = Some(n);
        self
    }

    /// At most `limit` of elapsed time on the host's clock from the run's start: no model call
    /// or tool batch starts once it has passed (see [`crate::interaction::run_clock`]). The
    /// run's delegates must stop by the same instant. Counted in whole milliseconds.
    pub fn time(mut self, limit: std::time::Duration) -> Budget {
        self.time_ms = Some(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// The time limit in milliseconds, if any.
    pub fn time_ms(&self) -> Option<u64> {
        self.time_ms
    }

    /// What a run does when a limit would be passed: fail (the default) or ask the host to
    /// extend ([`OnExhausted::AskHuman`]).
    pub fn on_exhausted(mut self, policy: OnExhausted) -> Budget {
        self.on_exhausted = policy;
        self
    }

    /// The exhaustion policy.
    pub fn exhaustion_policy(&self) -> OnExhausted {
        self.on_exhausted
    }

    /// The output tokens a model call reserves when its request sets no `max_output_tokens`
    /// (default [`DEFAULT_RESERVE_OUTPUT_TOKENS`]).
    pub fn reserve_output_tokens(mut self, n: u32) -> Budget {
        self.reserve_output_tokens = Some(n);
        self
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Whether no limit is set (tokens, cost, tool calls or time).
    pub fn is_unlimited(&self) -> bool {
        self.limits.is_unlimited() && self.time_ms.is_none()
    }

    /// The output tokens reserved for a call made with `options`.
    pub fn output_reservation(&self, options: &Options) -> u64 {
        u64::from(
            options.max_output_tokens.unwrap_or(self.reserve_output_tokens.unwrap_or(DEFAULT_RESERVE_OUTPUT_TOKENS)),
        )
    }

    /// The canonical JSON of the budget (for configuration digests).
    pub fn to_json(&self) -> Json {
        let b = ObjectBuilder::new().value("limits", self.limits.to_json());
        let b = match self.reserve_output_tokens {
            Some(n) => b.field("reserve_output_tokens", &n),
            None => b,
        };
        // Written only when set, so budgets without one keep their digest.
        let b = b.opt_field("time_ms", self.time_ms.as_ref());
        match self.on_exhausted {
            OnExhausted::Fail => b.build(),
            OnExhausted::AskHuman => b.field("on_exhausted", "ask_human").build(),
        }
    }
}

/// What a Definition needs to apply a budget: the budget, the price table and the model name a
/// request without `options.model` is priced as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetConfig {
    pub budget: Budget,
    pub prices: Prices,
    pub model: String,
}

impl BudgetConfig {
    /// The price of a call made with `options`.
    pub fn price(&self, options: &Options) -> Option<Price> {
        self.prices.get(options.model.as_deref().unwrap_or(&self.model))
    }

    /// The reservation of a model call over a context of `context_bytes` made with
    /// `options` under `limits` (the run's own, tightened by a grant); `Err` names a model
    /// without a price while a cost limit applies.
    pub fn reservation(&self, limits: &Limits, context_bytes: u64, options: &Options) -> Result<Amounts, String> {
        let input = context_bytes.div_ceil(BYTES_PER_INPUT_TOKEN);
        let output = self.budget.output_reservation(options);
        let cost = match (self.price(options), limits.cost_micros) {
            (Some(p), _) => p.cost_micros(Usage::new(input, output)),
            (None, None) => 0,
            (None, Some(_)) => {
                let model = options.model.as_deref().unwrap_or(&self.model);
                return Err(format!(
                    "budget: the cost limit needs a price for model `{model}`; add it to the agent's Prices"
                ));
            }
        };
        Ok(Amounts { input_tokens: input, output_tokens: output, total_tokens: input + output, cost_micros: cost, tool_calls: 0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_integer_micro_dollars_rounded_up_with_cached_input_priced_apart() {
        let p = Price::per_million_usd_micros(2_500_000, 10_000_000).cached_input(1_250_000);
        assert_eq!(p.cost_micros(Usage::new(1_000_000, 0)), 2_500_000);
        assert_eq!(p.cost_micros(Usage::new(0, 1)), 10);
        // 1 input token costs 2.5 micro-dollars: rounded up to 3.
        assert_eq!(p.cost_micros(Usage::new(1, 0)), 3);
        let cached = Usage { cache_read_tokens: 1_000_000, ..Usage::new(1_000_000, 0) };
        assert_eq!(p.cost_micros(cached), 1_250_000);
        assert_eq!(Price::per_million_usd_micros(u64::MAX, u64::MAX).cost_micros(Usage::new(u64::MAX, u64::MAX)), u64::MAX);
    }

    #[test]
    fn limits_name_the_first_exceeded_with_figures_and_grants_split_what_remains() {
        let limits = Budget::new().total_tokens(100).tool_calls(3).limits();
        let spent = Amounts { total_tokens: 60, tool_calls: 1, ..Amounts::default() };
        let fits = Amounts { total_tokens: 40, ..Amounts::default() };
        assert_eq!(limits.first_exceeded(spent, fits), None);
        let over = Amounts { total_tokens: 41, ..Amounts::default() };
        let e = limits.first_exceeded(spent, over).unwrap();
        assert_eq!((e.kind, e.limit, e.spent, e.reserved), (BudgetKind::TotalTokens, 100, 60, 41));
        let f = e.failure("the next model call");
        assert_eq!(f.code.as_str(), "interaction.budget.total_tokens");
        assert!(f.message.as_str().contains("limit 100, spent 60"), "{}", f.message.as_str());
        let grant = limits.share_of_remaining(spent, 2);
        assert_eq!((grant.total_tokens, grant.tool_calls, grant.input_tokens), (Some(20), Some(1), None));
        let own = Budget::new().total_tokens(10).cost_usd_micros(5).limits();
        let child = own.min(grant);
        assert_eq!((child.total_tokens, child.cost_micros, child.tool_calls), (Some(10), Some(5), Some(1)));
        assert_eq!(grant.as_charge(), Amounts { total_tokens: 20, tool_calls: 1, ..Amounts::default() });
    }

    #[test]
    fn wire_forms_omit_zero_and_refuse_explicit_zero_or_empty() {
        let s = Spending { cost_micros: 7, tool_calls: 0, charged: Amounts { tool_calls: 2, ..Amounts::default() } };
        let text = s.to_json().to_canonical_string();
        assert_eq!(text, r#"{"charged":{"tool_calls":2},"cost_micros":7}"#);
        assert_eq!(Spending::from_json(&s.to_json()).unwrap(), s);
        let zero = crate::json::parse(br#"{"cost_micros":7,"tool_calls":0}"#).unwrap();
        assert!(Spending::from_json(&zero).is_err());
        let l = Budget::new().input_tokens(0).limits();
        assert_eq!(Limits::from_json(&l.to_json()).unwrap(), l, "a zero limit is a limit");
        assert!(Limits::from_json(&crate::json::parse(b"{}").unwrap()).is_err());
    }

    #[test]
    fn reservation_uses_max_output_tokens_and_needs_a_price_for_a_cost_limit() {
        let mut config = BudgetConfig { budget: Budget::new().total_tokens(1000), model: "m".into(), ..Default::default() };
        let options = Options { max_output_tokens: Some(100), ..Options::default() };
        let limits = config.budget.limits();
        let r = config.reservation(&limits, 41, &options).unwrap();
        assert_eq!((r.input_tokens, r.output_tokens, r.total_tokens, r.cost_micros), (11, 100, 111, 0));
        let default = config.reservation(&limits, 0, &Options::default()).unwrap();
        assert_eq!(default.output_tokens, u64::from(DEFAULT_RESERVE_OUTPUT_TOKENS));
        // A cost limit granted by a parent needs a price as much as the run's own.
        let granted = limits.min(Budget::new().cost_usd_micros(10).limits());
        let e = config.reservation(&granted, 41, &options).unwrap_err();
        assert!(e.contains("price for model `m`"), "{e}");
        config.prices = Prices::new().model("m", Price::per_million_usd_micros(1_000_000, 1_000_000));
        assert_eq!(config.reservation(&granted, 41, &options).unwrap().cost_micros, 111);
    }
}
