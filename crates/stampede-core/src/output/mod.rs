pub mod ci;
pub mod compare;
pub mod html;
pub mod live;
pub mod reference;
pub mod report;
pub mod verdict;
