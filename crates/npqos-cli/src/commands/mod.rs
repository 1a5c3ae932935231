//! One module per subcommand.
pub mod live;
pub mod model;
pub mod reproduce;
pub mod run;
pub mod sweep;
pub mod trace;
