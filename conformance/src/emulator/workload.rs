//! [`Workload`]: prompts (token ids) that share prefixes the way real traffic does — one
//! system prompt every request starts with, multi-turn chats whose every turn resends the whole
//! conversation, and agent loops that grow one long tool-laden context step by step. Under a
//! prefix cache ([`super::WriterConfig::prefix_cache`]) the engine then stores the shared
//! blocks once and chains every later block on them: the traffic that hides a wrong root
//! behind hundreds of chained blocks.
//!
//! Deterministic (a seeded xorshift64*), so a test's figures repeat.

/// A small deterministic generator (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A value in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }

    /// `n` token ids in `1..=VOCAB`.
    pub fn ids(&mut self, n: usize) -> Vec<u32> {
        (0..n).map(|_| self.below(VOCAB) as u32 + 1).collect()
    }
}

/// Token ids are drawn from `1..=VOCAB` (every engine's hash takes them).
pub const VOCAB: u64 = 30_000;

/// What kind of traffic a [`Workload`] sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Every request: the one system prompt, then a fresh user message.
    SystemPrompt,
    /// Conversations on the system prompt: each request resends the conversation so far, one
    /// assistant reply and one user turn longer (a few conversations interleaved, each
    /// restarting after some turns).
    MultiTurn,
    /// Agent loops: the system prompt, a long shared tool description and a task, then one
    /// observation and thought more per step.
    AgentLoop,
    /// The three interleaved (40 % system prompt, 35 % chat turns, 25 % agent steps).
    Mixed,
}

impl Shape {
    /// Every shape.
    pub const ALL: [Shape; 4] = [
        Shape::SystemPrompt,
        Shape::MultiTurn,
        Shape::AgentLoop,
        Shape::Mixed,
    ];
}

/// A conversation or agent run in progress.
#[derive(Debug, Clone)]
struct Session {
    ids: Vec<u32>,
    turns_left: usize,
}

/// A stream of prompts of one [`Shape`].
#[derive(Debug, Clone)]
pub struct Workload {
    rng: Rng,
    shape: Shape,
    system: Vec<u32>,
    tools: Vec<u32>,
    chats: Vec<Session>,
    agents: Vec<Session>,
}

impl Workload {
    /// A workload of `shape` for an engine of `block_size` tokens per block: a system prompt
    /// of 3–6 blocks and a partial one (real prompts are not block-aligned), tool descriptions
    /// of 8–12 blocks more.
    pub fn new(shape: Shape, seed: u64, block_size: usize) -> Workload {
        let mut rng = Rng::new(seed);
        let bs = block_size.max(1);
        let n = rng.between(3, 6) * bs + rng.between(1, bs.saturating_sub(1).max(1));
        let system = rng.ids(n);
        let n = rng.between(8, 12) * bs;
        let tools = rng.ids(n);
        Workload {
            rng,
            shape,
            system,
            tools,
            chats: Vec::new(),
            agents: Vec::new(),
        }
    }

    /// The shared system prompt.
    pub fn system_prompt(&self) -> &[u32] {
        &self.system
    }

    /// The next prompt.
    pub fn next_prompt(&mut self) -> Vec<u32> {
        let shape = match self.shape {
            Shape::Mixed => match self.rng.below(20) {
                0..=7 => Shape::SystemPrompt,
                8..=14 => Shape::MultiTurn,
                _ => Shape::AgentLoop,
            },
            s => s,
        };
        match shape {
            Shape::MultiTurn => self.chat_turn(),
            Shape::AgentLoop => self.agent_step(),
            _ => self.single(),
        }
    }

    fn single(&mut self) -> Vec<u32> {
        let mut p = self.system.clone();
        let n = self.rng.between(4, 200);
        p.extend(self.rng.ids(n));
        p
    }

    fn chat_turn(&mut self) -> Vec<u32> {
        // Up to 6 conversations in flight; a new one now and then.
        if self.chats.len() < 6 && (self.chats.is_empty() || self.rng.below(4) == 0) {
            let mut ids = self.system.clone();
            let n = self.rng.between(8, 120);
            ids.extend(self.rng.ids(n));
            let turns_left = self.rng.between(3, 10);
            self.chats.push(Session { ids, turns_left });
            return self.chats.last().map(|s| s.ids.clone()).unwrap_or_default();
        }
        let i = self.rng.below(self.chats.len() as u64) as usize;
        let reply = self.rng.between(16, 160);
        let user = self.rng.between(4, 80);
        let more = {
            let mut m = self.rng.ids(reply);
            m.extend(self.rng.ids(user));
            m
        };
        let s = &mut self.chats[i];
        s.ids.extend(more);
        s.turns_left = s.turns_left.saturating_sub(1);
        let out = s.ids.clone();
        if s.turns_left == 0 {
            self.chats.swap_remove(i);
        }
        out
    }

    fn agent_step(&mut self) -> Vec<u32> {
        if self.agents.len() < 3 && (self.agents.is_empty() || self.rng.below(5) == 0) {
            let mut ids = self.system.clone();
            ids.extend_from_slice(&self.tools);
            let n = self.rng.between(10, 60);
            ids.extend(self.rng.ids(n));
            let turns_left = self.rng.between(4, 15);
            self.agents.push(Session { ids, turns_left });
            return self
                .agents
                .last()
                .map(|s| s.ids.clone())
                .unwrap_or_default();
        }
        let i = self.rng.below(self.agents.len() as u64) as usize;
        let n = self.rng.between(30, 200);
        let step = self.rng.ids(n);
        let s = &mut self.agents[i];
        s.ids.extend(step);
        s.turns_left = s.turns_left.saturating_sub(1);
        let out = s.ids.clone();
        if s.turns_left == 0 {
            self.agents.swap_remove(i);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_shares_the_system_prompt_and_grows_its_sessions() {
        for shape in Shape::ALL {
            let mut w = Workload::new(shape, 42, 16);
            let system = w.system_prompt().to_vec();
            let prompts: Vec<Vec<u32>> = (0..200).map(|_| w.next_prompt()).collect();
            assert!(prompts.iter().all(|p| p.starts_with(&system)), "{shape:?}");
            // Sessions resend what came before: some prompt extends an earlier one beyond the
            // system prompt (chats, agents), or none does (single requests).
            let long = system.len() + 16;
            let extends = prompts.iter().enumerate().any(|(i, p)| {
                prompts[..i]
                    .iter()
                    .any(|q| q.len() > long && p.len() > q.len() && p.starts_with(q))
            });
            assert_eq!(extends, shape != Shape::SystemPrompt, "{shape:?}");
        }
    }
}
