// The rank of the start-up bench as a JavaScript entry: one barrier, then done.
export default async function main(ctx) {
  await ctx.world.barrier();
  return ctx.rank;
}
