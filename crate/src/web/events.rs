//! A session's events and errors as the worker receives them.

use wasm_bindgen::prelude::*;

use super::PageDevices;
use super::to_js;
use crate::run::{Event, Session};

/// A call's failure `error` as the worker receives it, once the session
/// has looked for a lost device (`Session::after_failure`): the run
/// rebuilt, with `recovered: {lostAt, resumedFrom, reason}` set; gone
/// (`session_error`); or `error` as it was.
pub(super) async fn failure_to_js(session: &mut Session<PageDevices>, error: JsValue) -> JsValue {
    match session.after_failure().await {
        Ok(Some(Event::Lost { at, reason, from })) => {
            let message = format!(
                "the GPU device was lost at step {at}; the run resumed from its snapshot of step {from}"
            );
            let failure = js_sys::Error::new(&message);
            let recovered =
                serde_json::json!({"lostAt": at, "resumedFrom": from, "reason": reason});
            if let Ok(recovered) = to_js(&recovered) {
                let _ = js_sys::Reflect::set(&failure, &"recovered".into(), &recovered);
            }
            failure.into()
        }
        Ok(_) => error,
        Err(e) => session_error(e),
    }
}

/// `e` as a JS Error; where the session gave up on a lost device, with
/// `gone: {lostAt, snapshotStep, reason}` set.
pub(super) fn session_error(e: crate::Error) -> JsValue {
    let error = js_sys::Error::new(&e.to_string());
    if let crate::Error::RunLost {
        at,
        reason,
        snapshot,
        ..
    } = &e
    {
        let gone = serde_json::json!({"lostAt": at, "snapshotStep": snapshot, "reason": reason});
        if let Ok(gone) = to_js(&gone) {
            let _ = js_sys::Reflect::set(&error, &"gone".into(), &gone);
        }
    }
    error.into()
}

/// `events` for the page: a saved event carries its bytes as a Uint8Array.
pub(super) fn events_to_js(events: Vec<Event>) -> Result<js_sys::Array, JsError> {
    let array = js_sys::Array::new();
    for event in events {
        let value = to_js(&event)?;
        if let Event::Saved { bytes, .. } = &event {
            let bytes = js_sys::Uint8Array::from(&bytes[..]);
            js_sys::Reflect::set(&value, &"bytes".into(), &bytes)
                .map_err(|_| JsError::new("a saved event took no bytes"))?;
        }
        array.push(&value);
    }
    Ok(array)
}
