//! A small weather agent, as a user of keel would write it: a weather lookup (declared
//! idempotent, so the host may re-run it after a crash), a table booking with a real side
//! effect (an Unknown outcome is reported to the model, never re-performed), and a question
//! to the user. `tests/campaign.rs` fault-tests it with keel-sim's harness.

use keel::prelude::*;
use std::sync::{Arc, Mutex};

/// The booking system the agent writes to: every booking is a side effect that must not
/// happen twice for one request.
#[derive(Clone, Default)]
pub struct Bookings {
    made: Arc<Mutex<Vec<String>>>,
}

impl Bookings {
    /// Books a table; returns the confirmation number.
    pub fn book(&self, city: &str) -> usize {
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        made.push(city.to_owned());
        made.len()
    }

    /// Every booking made so far.
    pub fn all(&self) -> Vec<String> {
        self.made.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

const CITY: &str = r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#;

fn city_of(args: &Json) -> String {
    args.get("city").and_then(|c| c.as_str()).unwrap_or("?").to_owned()
}

/// The weather tool: its answer depends only on its arguments, so running it twice is safe.
pub fn weather_tool() -> FnTool {
    tool_fn("get_weather", "The current weather of a city.", CITY, |args| async move {
        let city = city_of(&args);
        let forecast = match city.as_str() {
            "Paris" => "sunny, 21 °C",
            "Oslo" => "snow, -3 °C",
            _ => "cloudy, 15 °C",
        };
        Ok(format!("{forecast} in {city}"))
    })
}

/// The booking tool: each call books a table (a side effect outside the agent).
pub fn booking_tool(bookings: Bookings) -> FnTool {
    tool_fn("book_table", "Books a table for tonight in a city.", CITY, move |args| {
        let bookings = bookings.clone();
        async move {
            let city = city_of(&args);
            let number = bookings.book(&city);
            Ok(format!("table booked in {city}, confirmation #{number}"))
        }
    })
}

/// The agent, without its model (the application adds a real client; tests add a script).
pub fn weather_agent(bookings: Bookings) -> AgentBuilder {
    Agent::builder("weather")
        .version("1.0.0")
        .tool_with(weather_tool(), ToolOptions::new().shared().idempotent())
        .tool_with(booking_tool(bookings), ToolOptions::new().shared().on_unknown(UnknownPolicy::ReportToModel))
        .tool(AskHuman::new("ask_user", "Asks the user a question."))
        .max_concurrent_tool_calls(2)
        .max_model_calls(6)
}

/// What the model does in tests: ask for the city, look up the weather and book at once,
/// then answer.
pub fn script() -> ScriptedModel {
    ScriptedModel::new()
        .call_tool("ask_user", r#"{"question":"Which city?"}"#)
        .call_tools([("get_weather", r#"{"city":"Paris"}"#), ("book_table", r#"{"city":"Paris"}"#)])
        .then_text("It is sunny in Paris and your table is booked.")
}
