// Numbers written for people, without Intl: its first use loads ICU's locale data (22 ms on a slow
// machine), which a message built as a module loads would cost every start (docs/performance.md).

/** A whole number's digits grouped by threes with commas, as en-GB writes them: "1000" → "1,000". */
export function groupThousands(digits: string): string {
  return digits.replace(/\B(?=(\d{3})+$)/g, ',');
}
