//! The agent host of nish-driver: the broker's plumbing, which decides nothing.
//!
//! It starts the sandboxed agents and supervises them, opens the connections they are handed
//! (OpenSSH's monitor: the agents open no socket of their own), relays and filters their
//! accessibility-bus traffic, and implements the decider's [`nish_decider::backend::Backend`]
//! for the real Linux desktop.
//!
//! - [`agents`]: starting an agent, its typed connection, reaping it;
//! - [`linux`]: the [`linux::LinuxBackend`]: the agents' slots, restarts, act grants, the doctor;
//! - [`wayland`]: the doctor on a Wayland session;
//! - [`portal`]: the desktop portal's answers on the session bus;
//! - [`shortcuts`]: the stop hotkey on a Wayland session, through the desktop portal;
//! - [`remote`]: visible takeover on a Wayland session, through the desktop portal;
//! - [`keymap`]: the keyboard layout the compositor gives keys by, for that takeover's typing;
//! - [`handover`]: the connections opened for agents and handed over;
//! - [`busfilter`]: the agents' D-Bus filter;
//! - [`procstatus`]: an agent's lock-down as the kernel shows it;
//! - [`assistive`]: the administrator's opt-in for assistive XTEST clicks.

pub mod act_grant;
pub mod acts;
pub mod agents;
pub mod assistive;
pub mod backend;
pub mod busfilter;
pub mod clipboard;
pub mod compositor;
pub mod desktop;
pub mod doctor;
pub mod failures;
pub mod handover;
pub mod held_trees;
pub mod idle_watch;
pub mod indicator;
pub mod keymap;
pub mod kwin_cast;
pub mod kwin_scene;
pub mod linux;
pub mod messages;
pub mod monitor;
pub mod narrator;
pub mod portal;
pub mod procstatus;
pub mod reads;
pub mod remote;
pub mod screencast;
pub mod shortcuts;
pub mod slot;
pub mod sys;
pub mod wayland;
