//! Request ids between the client and rmcp. Every client request gets an id
//! of ours on the way in, and its own back on the way out. rmcp then never
//! sees two requests with one id: a client that reuses the id of a request
//! still in flight is refused here, and the first request carries on
//! untouched (rmcp would otherwise answer or cancel the wrong one).

use std::collections::HashMap;

use rmcp::model::RequestId;

#[derive(Default)]
pub struct Ids {
    next: i64,
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
        self.next += 1;
        self.ours.insert(theirs.clone(), self.next);
        self.theirs.insert(self.next, theirs.clone());
        Some(RequestId::Number(self.next))
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
}
