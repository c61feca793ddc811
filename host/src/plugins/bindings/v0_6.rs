//! `chorus:strategy@0.6.0`, the current contract: 0.5's conversions, and
//! tool calls — the caller's tools on the request, a model's proposed calls
//! on its reply, tools a plugin offers its own calls, the calls an answer
//! makes, and `synthesizer.choose-tool-calls`, the strategy's decision on
//! the panel's calls.

generated!("../wit/0.6.0");

use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use super::{GuestAnswer, GuestToolDecision, Sources};
use crate::attach;
use crate::llm;
use crate::llm::tools::{Tool, ToolCall, ToolChoice, ToolUse};
use crate::plugins::sandbox::{State, Stopped};
use crate::plugins::types::{self as own, Kind};

pub const VERSION: &str = "0.6.0";

since_0_4!(reply(reply) => {
    tool_calls: reply.tool_calls.iter().map(call_of).collect(),
}, request(r) => {
    tools: r.tools.as_deref().map(offered_of),
});

adapters!(m => {
    input_modalities: m.input_modalities.clone(),
}, host => {
    async fn complete_answer(
        &mut self,
        request: wit::ChatRequest,
    ) -> wasmtime::Result<wit::Completion> {
        let label = request.label.clone();
        let request = llm::ChatRequest::try_from(request)
            .map_err(|why| wasmtime::Error::new(Stopped::BadRequest { index: 0, label, why }))?;
        Ok((&self.complete_answer(request).await).into())
    }
}, chat(r) => {
    tools: r.tools.map(tool_use_of).transpose()?.map(Arc::new),
}, answer(a) => {
    tool_calls: a.tool_calls.into_iter().map(own_call).collect(),
} kinds => {
    wit::AnswerKind::ToolCall => Self::ToolCall,
});

impl Guest {
    /// Calls the plugin's `choose-tool-calls`.
    pub async fn choose_tool_calls(
        &self,
        store: &mut Store<State>,
        request: &own::Request,
        plan: &own::Plan,
        completions: &[llm::Completion],
        settings: &str,
    ) -> wasmtime::Result<Result<GuestToolDecision, String>> {
        let Self::Synthesizer(pre) = self else {
            return Err(super::wrong_kind());
        };
        let completions: Vec<wit::Completion> = completions.iter().map(Into::into).collect();
        let plugin = pre.instantiate_async(&mut *store).await?;
        let decision = plugin
            .chorus_strategy_synthesizer()
            .call_choose_tool_calls(
                &mut *store,
                &request.into(),
                &plan.into(),
                &completions,
                settings,
            )
            .await?;
        Ok(decision.map(|d| match d {
            wit::ToolDecision::ByHost => GuestToolDecision::ByHost,
            wit::ToolDecision::Merge => GuestToolDecision::Merge,
            wit::ToolDecision::Answer(a) => GuestToolDecision::Answer(guest_answer(a)),
        }))
    }
}

fn call_of(call: &ToolCall) -> wit::ToolCall {
    wit::ToolCall {
        id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    }
}

fn own_call(call: wit::ToolCall) -> ToolCall {
    ToolCall {
        id: call.id,
        name: call.name,
        arguments: call.arguments,
    }
}

/// The caller's tools as the contract shows them (the exchange is the
/// host's to send: a plugin's call that offers tools gets it).
fn offered_of(tools: &ToolUse) -> wit::ToolsOffered {
    wit::ToolsOffered {
        tools: tools
            .tools
            .iter()
            .map(|t| wit::Tool {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.parameters.to_string(),
            })
            .collect(),
        choice: match &tools.choice {
            ToolChoice::Auto => wit::ToolChoice::Auto,
            ToolChoice::None => wit::ToolChoice::None,
            ToolChoice::Required => wit::ToolChoice::Required,
            ToolChoice::Function(name) => wit::ToolChoice::Function(name.clone()),
        },
        parallel: tools.parallel,
    }
}

/// The tools a plugin offers its own call, or why they cannot be sent.
fn tool_use_of(offered: wit::ToolsOffered) -> Result<ToolUse, String> {
    let tools = offered
        .tools
        .into_iter()
        .map(|t| Tool::offered(t.name, t.description, &t.parameters))
        .collect::<Result<Vec<_>, _>>()?;
    let choice = match offered.choice {
        wit::ToolChoice::Auto => ToolChoice::Auto,
        wit::ToolChoice::None => ToolChoice::None,
        wit::ToolChoice::Required => ToolChoice::Required,
        wit::ToolChoice::Function(name) => {
            if !tools.iter().any(|t| t.name == name) {
                return Err(format!(
                    "its tool choice names `{name}`, which is not among the tools it offers"
                ));
            }
            ToolChoice::Function(name)
        }
    };
    Ok(ToolUse {
        tools,
        choice,
        parallel: offered.parallel,
        exchange: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(parameters: &str, choice: wit::ToolChoice) -> wit::ToolsOffered {
        wit::ToolsOffered {
            tools: vec![wit::Tool {
                name: "get_weather".into(),
                description: Some("The weather in a city".into()),
                parameters: parameters.into(),
            }],
            choice,
            parallel: Some(false),
        }
    }

    #[test]
    fn the_callers_tools_go_to_a_plugin_and_back_unchanged() {
        let tools = ToolUse {
            tools: vec![Tool {
                name: "get_weather".into(),
                description: None,
                parameters: serde_json::json!({"type": "object", "required": ["city"]}),
                strict: false,
            }],
            choice: ToolChoice::Function("get_weather".into()),
            parallel: None,
            exchange: Vec::new(),
        };
        let back = tool_use_of(offered_of(&tools)).unwrap();
        assert_eq!(back, tools);
    }

    #[test]
    fn tools_a_plugin_cannot_offer_are_refused_saying_why() {
        let not_json = tool_use_of(offered("{", wit::ToolChoice::Auto)).unwrap_err();
        assert!(
            not_json.contains("`get_weather` are not JSON"),
            "{not_json}"
        );
        let not_object = tool_use_of(offered("[]", wit::ToolChoice::Auto)).unwrap_err();
        assert!(
            not_object.contains("must be a JSON Schema object"),
            "{not_object}"
        );
        let elsewhere = tool_use_of(offered(
            "{}",
            wit::ToolChoice::Function("delete_everything".into()),
        ))
        .unwrap_err();
        assert!(
            elsewhere.contains("`delete_everything`, which is not among the tools"),
            "{elsewhere}"
        );
        let mut bad_name = offered("{}", wit::ToolChoice::Auto);
        bad_name.tools[0].name = "get weather".into();
        assert!(
            tool_use_of(bad_name)
                .unwrap_err()
                .contains("1 to 64 letters")
        );
    }
}
