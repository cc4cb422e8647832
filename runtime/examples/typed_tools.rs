//! Typed tools and a typed answer: tools as async functions of `serde` + `schemars` types,
//! declared options on them, a model that gets the arguments and the answer wrong first and is
//! told so, and the answer read back as a Rust type.
//!
//! Run: `cargo run -p keel-runtime --example typed_tools`

use keel::chat::{Request, Response};
use keel::env::BoxFuture;
use keel::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct StockArgs {
    /// The product code, for example "KB-101".
    sku: String,
    /// The warehouse to look in.
    warehouse: Warehouse,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, Debug)]
#[serde(rename_all = "lowercase")]
enum Warehouse {
    Lyon,
    Oslo,
}

#[derive(Serialize)]
struct Stock {
    sku: String,
    warehouse: Warehouse,
    units: u32,
}

/// The structured answer.
#[derive(Debug, Deserialize, JsonSchema)]
struct Availability {
    sku: String,
    total_units: u32,
    /// Where to ship from.
    ship_from: Warehouse,
}

/// The offline model's script, as a real model might behave: a warehouse that does not exist,
/// then two correct lookups at once, a loose answer, then the answer in the required shape.
fn script() -> ScriptedModel {
    ScriptedModel::new()
        .call_tool("stock", r#"{"sku":"KB-101","warehouse":"paris"}"#)
        .call_tools([
            ("stock", r#"{"sku":"KB-101","warehouse":"lyon"}"#),
            ("stock", r#"{"sku":"KB-101","warehouse":"oslo"}"#),
        ])
        .then_text("There are 12 keyboards, ship from Lyon.")
        .then_text(r#"{"sku":"KB-101","total_units":12,"ship_from":"lyon"}"#)
}

/// Prints the feedback each model call received (the last message of its request), so the
/// example shows what the model was told.
struct Narrated(ScriptedModel);

impl ModelClient for Narrated {
    fn call<'a>(&'a self, cx: &'a ModelCallContext, request: Request) -> BoxFuture<'a, Result<Response, ModelError>> {
        if let Some(last) = request.messages.last().filter(|_| request.messages.len() > 2) {
            let text = last.text();
            if !text.is_empty() {
                println!("  model is told: {text}");
            }
        }
        self.0.call(cx, request)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let stock = tool("stock", "Units of a product in one warehouse.", |args: StockArgs| async move {
        let units = match args.warehouse {
            Warehouse::Lyon => 9,
            Warehouse::Oslo => 3,
        };
        Ok::<_, String>(Stock { sku: args.sku, warehouse: args.warehouse, units })
    });
    let agent = Agent::builder("inventory")
        .version("1.0.0")
        .instructions("You answer stock questions. Look every warehouse up; never guess.")
        .model(Narrated(script()))
        // A lookup changes nothing: it may run again after a crash, and lookups of different
        // warehouses run at the same time.
        .tool_with(stock, ToolOptions::new().idempotent().keyed_by("warehouse"))
        .max_concurrent_tool_calls(2)
        .output::<Availability>()
        .max_model_calls(6)
        .build()?;

    let run = Runtime::in_memory(agent)?.start("How many KB-101 keyboards do we have?").await?;
    let mut events = run.events();
    while let Some(event) = events.next().await {
        if let RunEvent::ToolSettled { tool, is_error, text, .. } = event {
            println!("{tool} {}: {text}", if is_error { "failed" } else { "answered" });
        }
    }
    let answer: Availability = run.result().await?.output()?;
    println!("{} units of {}, ship from {:?}", answer.total_units, answer.sku, answer.ship_from);
    assert_eq!((answer.total_units, answer.ship_from as u8), (12, Warehouse::Lyon as u8));
    Ok(())
}
