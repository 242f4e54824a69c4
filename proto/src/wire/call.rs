//! Requests to the agents paired with their answers in the types.
//!
//! Each request the broker makes of an agent is a type implementing [`Call`]: it names the
//! message it is sent as and the one kind of answer it takes ([`Call::Answer`]). The agent's
//! message enum implements [`Reply`]: which request a message answers, and whether it is a
//! failure, which any call may get. The broker's router pairs each answer with the call waiting
//! for its id and checks its kind with [`Call::accepts`]: an answer of another kind is the
//! agent's protocol violation (it is cut off), not a value a handler has to check.

/// An agent's message as the broker's router reads it.
pub trait Reply: Sized {
    /// What a failed call carries.
    type Failure;
    /// The id of the request this answers, when it is an answer (a failure included).
    fn answer_id(&self) -> Option<u64>;
    /// True when this is a failure (an answer any call may get).
    fn is_failure(&self) -> bool;
    /// The failure it carries; itself when it is none.
    fn into_failure(self) -> Result<Self::Failure, Self>;
}

/// A request the broker makes of an agent, and the one kind of answer it takes.
pub trait Call: Sized {
    /// The broker's message enum to the agent.
    type Request;
    /// The agent's message enum to the broker.
    type Reply: Reply;
    /// What the call answers.
    type Answer;
    /// The request's message, under request id `id`.
    fn request(self, id: u64) -> Self::Request;
    /// Whether `reply`, an answer that is not a failure, is this call's kind of answer.
    fn accepts(reply: &Self::Reply) -> bool;
    /// This call's answer out of `reply`; `Err(reply)` when it is of another kind.
    fn answer(reply: Self::Reply) -> Result<Self::Answer, Self::Reply>;
}

/// What a call got: its answer, or its failure.
pub type Answered<C> = Result<<C as Call>::Answer, <<C as Call>::Reply as Reply>::Failure>;

/// A call's answer or its failure, from a reply its router accepted for it; `Err(reply)` when
/// the reply is another kind of answer.
pub fn answered<C: Call>(reply: C::Reply) -> Result<Answered<C>, C::Reply> {
    match reply.into_failure() {
        Ok(f) => Ok(Err(f)),
        Err(r) => C::answer(r).map(Ok),
    }
}

/// Implements [`Call`] for `$call`: sent as `$request` (with `$s` the call and `$id` the
/// request id), answered by a reply matching `$pat`, whose answer is `$answer`.
macro_rules! call {
    ($call:ty => $req:ty, $rep:ty, $ty:ty,
     |$s:ident, $id:ident| $request:expr,
     $pat:pat => $answer:expr) => {
        impl $crate::wire::call::Call for $call {
            type Request = $req;
            type Reply = $rep;
            type Answer = $ty;

            fn request(self, $id: u64) -> $req {
                let $s = self;
                $request
            }

            #[allow(unused_variables)]
            fn accepts(reply: &$rep) -> bool {
                matches!(reply, $pat)
            }

            fn answer(reply: $rep) -> Result<$ty, $rep> {
                match reply {
                    $pat => Ok($answer),
                    other => Err(other),
                }
            }
        }
    };
}

pub(crate) use call;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reader::{self, ListWindows, ReaderToBroker};

    /// A call takes its own answer and a failure, and nothing else.
    #[test]
    fn a_call_takes_only_its_own_kind_of_answer() {
        let own = ReaderToBroker::Windows {
            id: 3,
            windows: vec![],
        };
        let failed = ReaderToBroker::Failed {
            id: 3,
            failure: crate::wire::AgentFailure {
                code: "timeout".into(),
                message: String::new(),
            },
        };
        let other = ReaderToBroker::Rekept { id: 3, moved: true };
        assert!(ListWindows::accepts(&own) && !ListWindows::accepts(&other));
        assert!(failed.is_failure() && !own.is_failure());
        assert_eq!(answered::<ListWindows>(own), Ok(Ok(vec![])));
        assert!(matches!(answered::<ListWindows>(failed), Ok(Err(f)) if f.code == "timeout"));
        assert_eq!(answered::<ListWindows>(other.clone()), Err(other.clone()));
        assert!(reader::Rekeep::accepts(&other));
        assert_eq!(
            ListWindows.request(9),
            reader::BrokerToReader::ListWindows { id: 9 }
        );
    }
}
