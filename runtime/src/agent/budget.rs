//! The builder's budget options: limits on tokens, cost and tool calls for a run and its
//! delegate tree, and the price table a cost limit is counted with.

use super::build_error::BuildError;
use super::builder::AgentBuilder;
use crate::interaction::budget::{Budget, BudgetConfig, Prices};
use crate::json::{Json, ObjectBuilder};

impl AgentBuilder {
    /// Limits one run of this agent, its delegates' runs included: tokens (input, output,
    /// total), cost (with [`prices`](AgentBuilder::prices)) and tool calls. A model call is
    /// reserved before it starts (its context's bytes / 4 as input, the request's
    /// `max_output_tokens` or [`Budget::reserve_output_tokens`] as output) and settled from the
    /// usage the provider reports; a call that does not fit ends the run with a failure coded
    /// `interaction.budget.<limit>` naming the limit, what was spent and what the call needed.
    /// A delegate gets an equal share of what remains when it starts; its own budget, if
    /// tighter, applies too.
    ///
    /// ```
    /// use keel::prelude::*;
    /// let agent = Agent::builder("writer")
    ///     .version("1")
    ///     .model(ScriptedModel::new().then_text("Done."))
    ///     .budget(Budget::new().total_tokens(100_000).cost_usd_micros(500_000).tool_calls(20))
    ///     .prices(Prices::new().model("scripted", Price::per_million_usd_micros(3_000_000, 15_000_000)))
    ///     .build()
    ///     .unwrap();
    /// # let _ = agent;
    /// ```
    pub fn budget(mut self, budget: Budget) -> AgentBuilder {
        self.budget = budget;
        self
    }

    /// Prices per model name, in micro-dollars per million tokens: what a cost limit counts
    /// with. The agent's model (its identity's model name) needs a price when the budget
    /// limits cost.
    pub fn prices(mut self, prices: Prices) -> AgentBuilder {
        self.prices = prices;
        self
    }
}

/// The budget's part of the configuration digest; `None` (and the digest unchanged) for an
/// agent without budget or prices.
pub(super) fn budget_json(budget: &Budget, prices: &Prices) -> Option<Json> {
    (!budget.is_unlimited() || !prices.is_empty())
        .then(|| ObjectBuilder::new().value("limits", budget.to_json()).value("prices", prices.to_json()).build())
}

/// What the Definition applies; a cost limit without a price for the agent's model is refused.
pub(super) fn budget_config(agent: &str, budget: Budget, prices: Prices, model: &str) -> Result<BudgetConfig, BuildError> {
    if budget.limits().cost_micros.is_some() && prices.get(model).is_none() {
        return Err(BuildError::Budget {
            agent: agent.to_owned(),
            detail: format!(
                "the budget limits cost but model `{model}` has no price: add `.prices(Prices::new().model(\"{model}\", Price::per_million_usd_micros(input, output)))`"
            ),
        });
    }
    Ok(BudgetConfig { budget, prices, model: model.to_owned() })
}
