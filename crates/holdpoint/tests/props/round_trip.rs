//! Every wire type survives encoding and decoding unchanged, as JSON text
//! and as a `serde_json::Value`.

use std::fmt::Debug;

use holdpoint::agent::{AgentInit, AgentInput};
use holdpoint::session::{JsonStateCodec, SessionState, Snapshot, StateCodec};
use holdpoint::{Message, Part, Resume};
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::strategies;

fn round_trips<T>(value: &T) -> Result<(), TestCaseError>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let text = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
    prop_assert_eq!(&back, value, "text: {}", text);
    let as_value = serde_json::to_value(value).unwrap();
    let back: T = serde_json::from_value(as_value).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
    prop_assert_eq!(&back, value);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    /// A tool input's numbers come back exactly after a trip through JSON
    /// text (a restart must carry the paused call's input unchanged).
    #[test]
    fn numbers_round_trip_exactly(f in any::<f64>(), i in any::<i64>(), u in any::<u64>()) {
        let input = serde_json::json!({"f": serde_json::Number::from_f64(f), "i": i, "u": u});
        let text = serde_json::to_string(&input).unwrap();
        prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), input, "{}", text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parts_round_trip(part in strategies::part()) {
        round_trips::<Part>(&part)?;
    }

    #[test]
    fn messages_round_trip(message in strategies::message()) {
        round_trips::<Message>(&message)?;
    }

    #[test]
    fn resumes_round_trip(resume in strategies::resume()) {
        round_trips::<Resume>(&resume)?;
    }

    #[test]
    fn agent_inputs_round_trip(input in strategies::agent_input()) {
        round_trips::<AgentInput>(&input)?;
    }

    #[test]
    fn agent_inits_round_trip(init in strategies::agent_init()) {
        round_trips::<AgentInit>(&init)?;
    }

    #[test]
    fn session_states_round_trip(state in strategies::session_state()) {
        round_trips::<SessionState>(&state)?;
        // And through the codec that hands it to clients and takes it back.
        let encoded = JsonStateCodec.encode(&state).unwrap();
        prop_assert_eq!(JsonStateCodec.decode(encoded).unwrap(), state);
    }

    #[test]
    fn snapshots_round_trip(snapshot in strategies::snapshot()) {
        round_trips::<Snapshot>(&snapshot)?;
    }

    /// The directives built from a paused call decode as what was built,
    /// and pass validation against the history that holds the call.
    #[test]
    fn built_directives_round_trip_and_validate(
        name in "[a-z]{1,8}",
        reference in "[a-z0-9]{1,6}",
        input in strategies::json(),
        data in proptest::option::of(proptest::collection::btree_map("[a-z]{1,4}", strategies::json(), 0..3)),
        output in strategies::json(),
    ) {
        let mut paused = Part::tool_request(name, Some(reference), Some(input).filter(|v| !v.is_null()));
        paused.set_meta(holdpoint::message::metadata::INTERRUPT, serde_json::json!(true));
        let history = vec![Message::user_text("hi"), Message::new(holdpoint::Role::Model, vec![paused.clone()])];
        let data = data.map(|m| serde_json::Value::Object(m.into_iter().collect()));
        for built in [
            paused.restart(data.clone()).unwrap(),
            paused.restart_with_input(serde_json::json!({"changed": true}), data.clone()).unwrap(),
            paused.respond(output.clone()).unwrap(),
        ] {
            let text = serde_json::to_string(&built).unwrap();
            let decoded: Part = serde_json::from_str(&text).unwrap();
            if output.is_null() && built.as_tool_response().is_some() {
                // On the wire a null output and no output are the same;
                // both decode as none (and resume treats none as null).
                prop_assert_eq!(decoded.as_tool_response().unwrap().output.clone(), None);
            } else {
                round_trips::<Part>(&built)?;
            }
            let resume = Resume::from_parts([decoded]);
            prop_assert!(
                holdpoint::generate::validate_resume(&history, &resume).is_ok(),
                "a directive built from the paused call was refused: {}", text
            );
        }
    }
}
