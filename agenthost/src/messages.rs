//! The agents' wire messages as the agent host's router reads them: which is a lock-down report,
//! an answer (to which request), a connection request, and its kind in the decider's
//! permission table.

use nish_decider::conn::{Msg, indicator_kind, input_kind, reader_kind};
use nish_proto::wire::indicator::{BrokerToIndicator, IndicatorToBroker};
use nish_proto::wire::input::{BrokerToInput, InputToBroker};
use nish_proto::wire::reader::{BrokerToReader, ReaderToBroker};
use nish_proto::wire::{ConnectTarget, Connected, LockdownReport};

use crate::agents::{AgentMessage, AgentRequest};

impl AgentMessage for ReaderToBroker {
    fn lockdown(&self) -> Option<&LockdownReport> {
        match self {
            ReaderToBroker::Lockdown(r) => Some(r),
            _ => None,
        }
    }
    fn kind(&self) -> Msg {
        reader_kind(self)
    }
    fn connect_request(&self) -> Option<(u64, &ConnectTarget)> {
        match self {
            ReaderToBroker::Connect { id, target } => Some((*id, target)),
            _ => None,
        }
    }
}

impl AgentRequest for BrokerToReader {
    fn connected(id: u64, result: Connected) -> Option<Self> {
        Some(BrokerToReader::Connected { id, result })
    }
}

impl AgentRequest for BrokerToInput {
    fn connected(id: u64, result: Connected) -> Option<Self> {
        Some(BrokerToInput::Connected { id, result })
    }
}

impl AgentRequest for BrokerToIndicator {
    fn connected(id: u64, result: Connected) -> Option<Self> {
        Some(BrokerToIndicator::Connected { id, result })
    }
}

impl AgentMessage for IndicatorToBroker {
    fn lockdown(&self) -> Option<&LockdownReport> {
        match self {
            IndicatorToBroker::Lockdown(r) => Some(r),
            _ => None,
        }
    }
    fn kind(&self) -> Msg {
        indicator_kind(self)
    }
    fn connect_request(&self) -> Option<(u64, &ConnectTarget)> {
        match self {
            IndicatorToBroker::Connect { id, target } => Some((*id, target)),
            _ => None,
        }
    }
}

impl AgentMessage for InputToBroker {
    fn lockdown(&self) -> Option<&LockdownReport> {
        match self {
            InputToBroker::Lockdown(r) => Some(r),
            _ => None,
        }
    }
    fn kind(&self) -> Msg {
        input_kind(self)
    }
    fn connect_request(&self) -> Option<(u64, &ConnectTarget)> {
        match self {
            InputToBroker::Connect { id, target } => Some((*id, target)),
            _ => None,
        }
    }
}
