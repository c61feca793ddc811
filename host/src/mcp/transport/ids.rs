//! Request ids between the client and rmcp. Every client request gets an id
//! of ours on the way in, and its own back on the way out — wherever rmcp
//! writes it, not only in the response (see `LineTransport::encode`). rmcp
//! then never sees two requests with one id: a client that reuses the id
//! of a request still in flight is refused here, and the first request
//! carries on untouched (rmcp would otherwise answer or cancel the wrong
//! one).
//!
//! Ours are negative numbers: rmcp numbers the requests it sends the client
//! (`roots/list`) 0, 1, 2…, and a `notifications/cancelled` of rmcp's may
//! name one of those, which must go out as it is.

use std::collections::HashMap;

use rmcp::model::RequestId;

#[derive(Default)]
pub struct Ids {
    /// The last id given out: -1, -2, …
    last: i64,
    /// The client's id of each request in flight -> ours.
    ours: HashMap<RequestId, i64>,
    /// Ours -> the client's.
    theirs: HashMap<i64, RequestId>,
}

impl Ids {
    /// Our id for a new request, or `None` when the client's id is taken by
    /// a request still in flight.
    pub fn admit(&mut self, theirs: &RequestId) -> Option<RequestId> {
        if self.ours.contains_key(theirs) {
            return None;
        }
        self.last -= 1;
        self.ours.insert(theirs.clone(), self.last);
        self.theirs.insert(self.last, theirs.clone());
        Some(RequestId::Number(self.last))
    }

    /// Whether `id` is of the kind we give out (not necessarily in flight).
    pub fn is_ours(id: &RequestId) -> bool {
        matches!(id, RequestId::Number(n) if *n < 0)
    }

    /// The client's id for our request `ours` while it is in flight (a
    /// subscription's notifications name it); `None` once it is answered
    /// or cancelled, or when `ours` is not one of ours.
    pub fn theirs(&self, ours: &RequestId) -> Option<RequestId> {
        let RequestId::Number(ours) = ours else {
            return None;
        };
        self.theirs.get(ours).cloned()
    }

    /// The client cancelled its request `theirs`: our id for it, and the
    /// client's id is free again (its response will never be sent).
    pub fn cancel(&mut self, theirs: &RequestId) -> Option<RequestId> {
        let ours = self.ours.remove(theirs)?;
        self.theirs.remove(&ours);
        Some(RequestId::Number(ours))
    }

    /// The response to our request `ours` goes out: the client's id for it,
    /// or `None` when the client cancelled it (or it is not ours).
    pub fn answer(&mut self, ours: &RequestId) -> Option<RequestId> {
        let RequestId::Number(ours) = ours else {
            return None;
        };
        let theirs = self.theirs.remove(ours)?;
        self.ours.remove(&theirs);
        Some(theirs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> RequestId {
        RequestId::Number(n)
    }

    #[test]
    fn an_id_in_flight_is_refused_and_free_again_once_answered_or_cancelled() {
        let mut ids = Ids::default();
        let first = ids.admit(&id(1)).unwrap();
        assert!(ids.admit(&id(1)).is_none(), "a reused id is refused");
        let text = RequestId::String("1".into());
        let other = ids.admit(&text).unwrap();
        assert_ne!(first, other, "\"1\" and 1 are different ids");
        assert_eq!(ids.answer(&first), Some(id(1)));
        assert_eq!(ids.answer(&first), None, "answered once");
        let again = ids.admit(&id(1)).unwrap();
        assert_eq!(ids.cancel(&id(1)), Some(again.clone()));
        assert_eq!(
            ids.answer(&again),
            None,
            "a cancelled request is not answered"
        );
        assert!(ids.admit(&text).is_none(), "\"1\" is still in flight");
    }

    #[test]
    fn ours_are_never_the_ids_rmcp_gives_its_own_requests() {
        let mut ids = Ids::default();
        let ours = ids.admit(&RequestId::String("listen:0".into())).unwrap();
        assert!(matches!(ours, RequestId::Number(n) if n < 0), "{ours}");
        assert_eq!(
            ids.theirs(&ours),
            Some(RequestId::String("listen:0".into()))
        );
        assert_eq!(
            ids.theirs(&id(0)),
            None,
            "rmcp's first request to the client"
        );
        assert_eq!(ids.theirs(&id(1)), None);
        ids.answer(&ours);
        assert_eq!(ids.theirs(&ours), None, "answered: no longer in flight");
    }
}
