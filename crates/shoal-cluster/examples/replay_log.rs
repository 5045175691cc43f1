//! Replays a member's Raft log (`path.data/_state/raft/raft.log`) through the state machine
//! and prints, after every entry, the command and the copies of one shard: what a fault test
//! needs to see how the cluster manager moved a shard.
//!
//! `cargo run -p shoal-cluster --example replay_log -- <raft.log> <index> <shard>`

use shoal_cluster::raft::state_machine::apply_proposal;
use shoal_state::{ClusterState, Proposal};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, index, shard] = args.as_slice() else {
        eprintln!("usage: replay_log <raft.log> <index> <shard>");
        std::process::exit(2);
    };
    let shard: u32 = shard.parse().expect("shard number");
    let bytes = std::fs::read(path).expect("read the log");
    let mut state = ClusterState::default();
    for record in records(&bytes) {
        let Some(payload) = record.pointer("/Append/payload/Normal") else {
            continue;
        };
        let proposal: Proposal = serde_json::from_value(payload.clone()).expect("a proposal");
        let command = serde_json::to_string(&proposal.command).unwrap_or_default();
        if command.contains("disk_usage") {
            apply_proposal(&mut state, &proposal);
            continue;
        }
        let result = apply_proposal(&mut state, &proposal);
        println!(
            "{} {}",
            proposal.now_millis,
            &command[..command.len().min(220)]
        );
        if let Some(error) = result.error {
            println!("    refused: {error}");
        }
        print_shard(&state, index, shard);
    }
}

/// The records of the log file: a little-endian length, a crc, then JSON.
fn records(bytes: &[u8]) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let Some(body) = bytes.get(at + 8..at + 8 + len) else {
            break;
        };
        out.push(serde_json::from_slice(body).expect("a JSON record"));
        at += 8 + len;
    }
    out
}

fn print_shard(state: &ClusterState, index: &str, shard: u32) {
    let Some(meta) = state.metadata.indices.get(index) else {
        return;
    };
    let name = |id: &Option<String>| {
        id.as_ref()
            .and_then(|id| state.nodes.get(id))
            .map_or("-".to_string(), |n| n.name.clone())
    };
    let copies: Vec<String> = state
        .copies(index, shard)
        .iter()
        .map(|c| {
            format!(
                "{}{:?}@{}{}[{}]",
                if c.primary { "P:" } else { "r:" },
                c.state,
                name(&c.node),
                c.relocating_node
                    .as_ref()
                    .map_or(String::new(), |r| format!("->{}", name(&Some(r.clone())))),
                c.allocation_id
                    .as_deref()
                    .unwrap_or("")
                    .get(..5)
                    .unwrap_or("")
            )
        })
        .collect();
    let in_sync: Vec<&str> = meta.in_sync_allocations[shard as usize]
        .iter()
        .map(|id| id.get(..5).unwrap_or(id))
        .collect();
    println!(
        "    term {} in_sync {:?} | {}",
        meta.primary_terms[shard as usize],
        in_sync,
        copies.join("  ")
    );
}
